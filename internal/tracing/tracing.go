// Package tracing holds what the loop and the wiring share about traces
// without the OpenTelemetry SDK: a run's trace context as one W3C
// traceparent string (stored with the run, so a span ended after a restart
// still joins its run's trace), and the ID generator that lets a span be
// recorded late with the IDs its children already named. It imports the
// OpenTelemetry trace API only (no net/http: the loop imports it).
package tracing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// NewIDs returns a fresh trace ID and span ID.
func NewIDs() (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	var sid trace.SpanID
	for !tid.IsValid() {
		_, _ = rand.Read(tid[:])
	}
	for !sid.IsValid() {
		_, _ = rand.Read(sid[:])
	}
	return tid, sid
}

// Format is the W3C traceparent of a span context: 00-<trace>-<span>-<flags>.
func Format(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// TraceID is the trace id of a traceparent, "" when it is none.
func TraceID(traceparent string) string {
	sc, ok := Parse(traceparent)
	if !ok {
		return ""
	}
	return sc.TraceID().String()
}

// Parse reads a W3C traceparent (version 00 and its format only). It
// returns an invalid span context, and false, for anything else: an
// incoming header that is not a traceparent is ignored, never an error.
func Parse(s string) (trace.SpanContext, bool) {
	parts := strings.Split(strings.TrimSpace(s), "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(parts[1])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(parts[2])
	if err != nil {
		return trace.SpanContext{}, false
	}
	flags, err := hex.DecodeString(parts[3])
	if err != nil || strings.ToLower(parts[3]) != parts[3] {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
	return sc, sc.IsValid()
}

type wantKey struct{}

type want struct {
	tid trace.TraceID
	sid trace.SpanID
}

// WithIDs returns a context in which IDGenerator gives the next span it
// starts the IDs tid and sid: a span recorded when it ends (a run's span,
// ended by whichever process finishes the run) keeps the IDs its children
// were parented to.
func WithIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, wantKey{}, want{tid, sid})
}

// IDGenerator is the SDK's ID generator (it implements
// go.opentelemetry.io/otel/sdk/trace.IDGenerator) that honours WithIDs and
// otherwise draws random IDs.
type IDGenerator struct{}

// NewIDs returns the IDs of a root span.
func (IDGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if w, ok := ctx.Value(wantKey{}).(want); ok {
		return w.tid, w.sid
	}
	return NewIDs()
}

// NewSpanID returns the ID of a span of trace tid.
func (IDGenerator) NewSpanID(ctx context.Context, tid trace.TraceID) trace.SpanID {
	if w, ok := ctx.Value(wantKey{}).(want); ok && w.tid == tid {
		return w.sid
	}
	_, sid := NewIDs()
	return sid
}
