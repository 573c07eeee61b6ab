package loop

import (
	"context"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// This file records a run's spans (docs/observability.md), following the
// OpenTelemetry GenAI conventions: invoke_agent (the run), chat (a model
// step), execute_tool (a call's execution) and await_approval (a parked
// call's wait, from park to decision). The loop speaks the trace API only;
// package server configures the SDK and its exporter (server/otel.go).
//
// A parked run holds nothing in memory (house practice 14), so no span is
// kept open across a wait: the run's IDs are drawn when it starts and kept
// with the run (Run.TraceParent); every child names that span as its
// parent, the wait's span is recorded when the decision commits with the
// call's park time as its start, and the run's own span is recorded when
// the run finishes, from its start time and with its stored IDs
// (tracing.WithIDs, honoured by the ID generator package server installs).
// Whichever process finishes a run, its spans join one trace.

const tracerName = "github.com/agentd-dev/agentd/loop"

// The attributes of agentd's own, beside the GenAI conventions'.
const (
	attrTier          = "agentd.tier"
	attrDecision      = "agentd.approval.decision"
	attrDecidedBy     = "agentd.approval.decided_by"
	attrVia           = "agentd.approval.via"
	attrRunID         = "agentd.run.id"
	attrCorrelationID = "agentd.correlation_id"
)

// tracer is the engine's view of tracing: nil when it is off, so that a run
// without traces costs one nil check per span site.
type tracer struct {
	t       trace.Tracer
	content bool // record message text and tool arguments
}

func newTracer(tp trace.TracerProvider, content bool) *tracer {
	if tp == nil {
		return nil
	}
	return &tracer{t: tp.Tracer(tracerName), content: content}
}

// startTrace gives a new run its trace context: a child of the caller's
// span when ctx carries one (an incoming traceparent), else a new trace.
func (tr *tracer) startTrace(ctx context.Context, run *agentd.Run) {
	if tr == nil {
		return
	}
	tid, sid := tracing.NewIDs()
	flags := trace.FlagsSampled
	if caller := trace.SpanContextFromContext(ctx); caller.IsValid() {
		tid, flags = caller.TraceID(), caller.TraceFlags()
		run.TraceCaller = caller.SpanID().String()
	}
	run.TraceParent = tracing.Format(trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags}))
}

// under returns ctx with the run's span as its (remote) parent: the spans
// started from it join the run's trace. Without a stored trace context
// (traces were off when the run started) it returns ctx.
func (tr *tracer) under(ctx context.Context, run *agentd.Run) context.Context {
	if tr == nil || run == nil {
		return ctx
	}
	sc, ok := tracing.Parse(run.TraceParent)
	if !ok {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// runSpan records the span of a run that just ended, from its start to
// now, with the IDs its children were parented to.
func (tr *tracer) runSpan(run *agentd.Run, agent string, status agentd.RunStatus, errMsg string, end time.Time) {
	if tr == nil {
		return
	}
	sc, ok := tracing.Parse(run.TraceParent)
	if !ok {
		return
	}
	ctx := tracing.WithIDs(context.Background(), sc.TraceID(), sc.SpanID())
	if caller, err := trace.SpanIDFromHex(run.TraceCaller); err == nil {
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: sc.TraceID(), SpanID: caller, TraceFlags: sc.TraceFlags(), Remote: true}))
	}
	_, span := tr.t.Start(ctx, "invoke_agent "+agent, trace.WithTimestamp(run.CreatedAt), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", agent),
			attribute.String("gen_ai.conversation.id", run.ConversationID),
			attribute.String(attrRunID, run.ID),
			attribute.String(attrCorrelationID, run.CorrelationID),
			attribute.String("agentd.run.status", string(status)),
			attribute.Int64("gen_ai.usage.input_tokens", run.Usage.InputTokens),
			attribute.Int64("gen_ai.usage.output_tokens", run.Usage.OutputTokens),
		))
	if status == agentd.RunFailed {
		span.SetStatus(codes.Error, errMsg)
	}
	span.End(trace.WithTimestamp(end))
}

// chatSpan starts the span of one model step; end it with endChat.
func (tr *tracer) chatSpan(ctx context.Context, run *agentd.Run, model string) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, nil
	}
	return tr.t.Start(tr.under(ctx, run), "chat "+model, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.request.model", model),
			attribute.String("gen_ai.conversation.id", run.ConversationID),
		))
}

func (tr *tracer) endChat(span trace.Span, resp *agentd.ModelResponse, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, agentd.ErrorMessage(err))
	} else {
		span.SetAttributes(
			attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.InputTokens),
			attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.OutputTokens),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{resp.StopReason}),
		)
		if tr.content && resp.Text != "" {
			span.SetAttributes(attribute.String("gen_ai.output.text", resp.Text))
		}
	}
	span.End()
}

// toolSpan starts the span of a call's execution; the tool's context
// carries it (a command tool gets it as TRACEPARENT). End it with endTool.
func (tr *tracer) toolSpan(ctx context.Context, run *agentd.Run, c agentd.ToolCall) (context.Context, trace.Span) {
	if tr == nil {
		return ctx, nil
	}
	ctx, span := tr.t.Start(tr.under(ctx, run), "execute_tool "+c.Name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", c.Name),
			attribute.String("gen_ai.tool.call.id", c.ID),
			attribute.String(attrTier, string(c.Tier)),
			attribute.String("agentd.tool.server_id", c.ServerID),
		))
	if tr.content {
		span.SetAttributes(attribute.String("gen_ai.tool.call.arguments", string(c.Arguments)))
	}
	return ctx, span
}

func endTool(span trace.Span, status agentd.CallStatus, errMsg string) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("agentd.tool.status", string(status)))
	if status == agentd.StatusFailed {
		span.SetStatus(codes.Error, errMsg)
	}
	span.End()
}

// waitSpan records the wait of a parked call c, decided at end: from its
// park (the call's last update before the decision) to the decision.
func (tr *tracer) waitSpan(run *agentd.Run, c agentd.ToolCall, decision, decidedBy, via string, end time.Time) {
	if tr == nil || run == nil {
		return
	}
	_, span := tr.t.Start(tr.under(context.Background(), run), "await_approval "+c.Name,
		trace.WithTimestamp(c.UpdatedAt), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("gen_ai.tool.name", c.Name),
			attribute.String("gen_ai.tool.call.id", c.ID),
			attribute.String(attrTier, string(c.Tier)),
			attribute.String(attrDecision, decision),
			attribute.String(attrDecidedBy, decidedBy),
			attribute.String(attrVia, via),
		))
	span.End(trace.WithTimestamp(end))
}

// runTrace is traceRun read once per driver of the run: its calls' spans
// share the read.
func (e *runner) runTrace(rs *runState, runID string) *agentd.Run {
	if e.tr == nil {
		return nil
	}
	rs.traceOnce.Do(func() { rs.traced = e.traceRun(rs.ctx, runID) })
	return rs.traced
}
