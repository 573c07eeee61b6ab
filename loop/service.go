package loop

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/tracing"
)

// MaxMessageBytes bounds a user message.
const MaxMessageBytes = 64 << 10

// notFound is the one answer for an object the principal may not reach,
// whether it exists elsewhere or nowhere (SPEC §5): the same code and the
// same message, so a 404 tells nothing about other tenants.
func notFound(what string) error { return agentd.Errorf(agentd.ENOTFOUND, "%s not found", what) }

// CreateConversation starts a conversation with the engine's agent. A
// conversation created with a delegate-role key is delegated (SPEC §2.2).
func (e *Engine) CreateConversation(ctx context.Context, p agentd.Principal, agent string, metadata json.RawMessage) (*agentd.Conversation, error) {
	if agent != "" && agent != e.agent.Name {
		return nil, agentd.Errorf(agentd.EINVALID, "unknown agent %q (this server runs %q)", agent, e.agent.Name)
	}
	if len(metadata) > 0 {
		var obj map[string]any
		if err := json.Unmarshal(metadata, &obj); err != nil || obj == nil {
			return nil, agentd.Errorf(agentd.EINVALID, "metadata must be a JSON object")
		}
		if !utf8.Valid(metadata) {
			// It is stored and given back as is: it must be JSON a client can read.
			return nil, agentd.Errorf(agentd.EINVALID, "metadata must be valid UTF-8")
		}
		if len(metadata) > 16<<10 {
			return nil, agentd.Errorf(agentd.EINVALID, "metadata is larger than 16 KiB")
		}
	}
	c := &agentd.Conversation{
		ID: agentd.NewID(agentd.PrefixConversation), TenantID: p.TenantID, ProjectID: p.ProjectID,
		Agent: e.agent.Name, Metadata: metadata, Delegated: p.Role == agentd.RoleDelegate,
		CreatedBy: p.KeyID, CreatedAt: e.clock.Now().UTC(),
	}
	if err := e.store.CreateConversation(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Conversation returns a conversation the principal reaches; ENOTFOUND
// otherwise.
func (e *Engine) Conversation(ctx context.Context, p agentd.Principal, id string) (*agentd.Conversation, error) {
	if err := agentd.CheckID(agentd.PrefixConversation, "conversation id", id); err != nil {
		return nil, err
	}
	return e.reach(ctx, p, id, "conversation")
}

// ConversationDetail returns a conversation with its messages and tool calls.
func (e *Engine) ConversationDetail(ctx context.Context, p agentd.Principal, id string) (*agentd.ConversationDetail, error) {
	c, err := e.Conversation(ctx, p, id)
	if err != nil {
		return nil, err
	}
	msgs, err := e.store.Messages(ctx, id)
	if err != nil {
		return nil, err
	}
	calls, err := e.store.ToolCalls(ctx, id)
	if err != nil {
		return nil, err
	}
	return &agentd.ConversationDetail{Conversation: c, Messages: msgs, ToolCalls: calls}, nil
}

// Send starts a run with a user message. ERUNACTIVE while a run is active.
func (e *Engine) Send(ctx context.Context, p agentd.Principal, convID, content string) (*agentd.Run, error) {
	conv, err := e.Conversation(ctx, p, convID)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(content) == "" {
		return nil, agentd.Errorf(agentd.EINVALID, "content must not be empty")
	}
	if len(content) > MaxMessageBytes {
		return nil, agentd.Errorf(agentd.EINVALID, "content is longer than %d bytes", MaxMessageBytes)
	}
	now := e.clock.Now().UTC()
	run := &agentd.Run{
		ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: conv.TenantID, ProjectID: conv.ProjectID,
		CorrelationID: agentd.NewCorrelationID(), Status: agentd.RunRunning, RequestedBy: p.KeyID, CreatedAt: now, UpdatedAt: now,
	}
	e.tr.startTrace(ctx, run)
	msg := &agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID,
		Role: agentd.RoleUser, Content: content, CreatedAt: now}
	err = e.commit(conv.ID, func() ([]agentd.Event, error) {
		return e.store.StartRun(ctx, run, msg, []agentd.EventDraft{e.event(conv.ID, &agentd.RunStartedPayload{
			RunID: run.ID, CorrelationID: run.CorrelationID, TraceID: tracing.TraceID(run.TraceParent),
		})})
	})
	if err != nil {
		return nil, err
	}
	e.log.Info().Str("conversation_id", conv.ID).Str("run_id", run.ID).Str("correlation_id", run.CorrelationID).Msg("run started")
	e.obs.RunStarted()
	e.drv.ensureDriver(run.ID, conv.Delegated)
	return run, nil
}

// Run returns a run of a conversation the principal reaches; ENOTFOUND
// otherwise.
func (e *Engine) Run(ctx context.Context, p agentd.Principal, id string) (*agentd.Run, error) {
	if err := agentd.CheckID(agentd.PrefixRun, "run id", id); err != nil {
		return nil, err
	}
	r, err := e.store.Run(ctx, id)
	if agentd.ErrorCode(err) == agentd.ENOTFOUND {
		return nil, notFound("run")
	} else if err != nil {
		return nil, err
	}
	if err := e.reachObject(ctx, p, r.TenantID, r.ProjectID, r.ConversationID, "run"); err != nil {
		return nil, err
	}
	return r, nil
}

// Cancel cancels an active run in one transaction (SPEC §5): the run
// becomes cancelled, parked and approved-but-unstarted calls become
// cancelled, and confirmation_resolved / tool_call_result / run_finished are
// committed with it; then its model step and tool processes stop.
// Cancelling a cancelled run returns it unchanged; any other finished run is
// ECONFLICT.
func (e *Engine) Cancel(ctx context.Context, p agentd.Principal, id string) (*agentd.Run, error) {
	run, err := e.Run(ctx, p, id)
	if err != nil {
		return nil, err
	}
	const reason = "cancelled"
	by := agentd.Actor{KeyID: cmp.Or(p.KeyID, agentd.AnonymousKeyID), Role: p.Role}
	var updated *agentd.Run
	var cancelled []agentd.ToolCall
	err = e.commit(run.ConversationID, func() ([]agentd.Event, error) {
		cur, evs, err := e.store.CancelRun(ctx, id, reason, by, e.clock.Now(), func(r *agentd.Run, calls []agentd.ToolCall) []agentd.EventDraft {
			var drafts []agentd.EventDraft
			cancelled = calls
			for _, c := range calls {
				for _, in := range c.Inputs {
					drafts = append(drafts, e.event(c.ConversationID, &agentd.InputResolvedPayload{InputID: in.ID,
						ToolCallID: c.ID, Status: agentd.InputCancelled, Via: agentd.ViaCancel, Reason: agentd.InputReasonRunCancelled}))
				}
				if c.Status == agentd.StatusRequiresConfirmation {
					drafts = append(drafts, e.resolvedEvent(c, &agentd.Decision{Decision: agentd.DecisionCancelled,
						Reason: "the run was cancelled", DecidedBy: by.KeyID, ArgumentsSHA256: c.ArgumentsSHA256}))
					continue
				}
				drafts = append(drafts, e.event(c.ConversationID, &agentd.ToolCallResultPayload{
					RunID: c.RunID, ToolCallID: c.ID, ToolName: c.Name, Status: agentd.StatusCancelled,
					Error: "the run was cancelled before the call started; nothing was done",
				}))
			}
			return append(drafts, e.event(r.ConversationID, &agentd.RunFinishedPayload{
				RunID: r.ID, CorrelationID: r.CorrelationID, Status: agentd.RunCancelled, Reason: reason, Usage: r.Usage,
			}))
		})
		updated = cur
		if err == nil {
			// Under the conversation's lock, before run_finished is
			// published: whatever commits after it (a subagent's next
			// tool_call_started) finds the run's context done.
			e.drv.stopDriver(id)
		}
		return evs, err
	})
	if err != nil {
		if agentd.ErrorCode(err) == agentd.ECONFLICT && updated != nil {
			if updated.Status == agentd.RunCancelled {
				return updated, nil
			}
			return nil, agentd.Errorf(agentd.ECONFLICT, "run is already %s", updated.Status)
		}
		return nil, err
	}
	e.log.Info().Str("run_id", id).Str("conversation_id", run.ConversationID).Msg("run cancelled")
	now := e.clock.Now()
	for _, c := range cancelled {
		if c.Status == agentd.StatusRequiresConfirmation {
			e.obs.Decided(agentd.DecisionCancelled, agentd.ViaCancel, now.Sub(c.UpdatedAt))
			e.tr.waitSpan(updated, c, agentd.DecisionCancelled, by.KeyID, agentd.ViaCancel, now)
		}
		e.obs.ToolCallFinished(agentd.StatusCancelled, c.Tier)
	}
	e.obs.RunFinished(agentd.RunCancelled)
	e.tr.runSpan(updated, e.agent.Name, agentd.RunCancelled, "", now)
	return updated, nil
}

// approvedBy is confirmation_resolved's approved_by: every key whose
// approval ran the call (the approvals of its quorum, then the last); nil
// for any other decision.
func approvedBy(c agentd.ToolCall, d *agentd.Decision) []string {
	if d.Decision != agentd.DecisionApproved {
		return nil
	}
	return agentd.ApprovedBy(c.Approvals, d.DecidedBy)
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// PendingApprovals returns up to q.Limit (1..100, default 50) parked
// calls of the principal's tenant and project that match q's filters,
// after its cursor (a tool call id; "" for the first page), and the cursor
// of the next page ("" at the end). EINVALID for a limit out of range, a
// cursor or conversation id that is not one, or a tool name or server id
// longer than 256 bytes.
func (e *Engine) PendingApprovals(ctx context.Context, p agentd.Principal, q agentd.PendingQuery) ([]agentd.ToolCall, string, error) {
	limit := q.Limit
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > 100 {
		return nil, "", agentd.Errorf(agentd.EINVALID, "limit must be between 1 and 100")
	}
	for _, id := range []struct{ prefix, what, v string }{
		{agentd.PrefixToolCall, "cursor", q.Cursor}, {agentd.PrefixConversation, "conversation_id", q.ConversationID},
	} {
		if id.v != "" {
			if err := agentd.CheckID(id.prefix, id.what, id.v); err != nil {
				return nil, "", err
			}
		}
	}
	if len(q.ToolName) > 256 || len(q.ServerID) > 256 {
		return nil, "", agentd.Errorf(agentd.EINVALID, "tool_name and server_id are at most 256 bytes")
	}
	f := agentd.PendingFilter{TenantID: p.TenantID, ProjectID: p.ProjectID, After: q.Cursor, Limit: limit + 1,
		ToolName: q.ToolName, ServerID: q.ServerID, ConversationID: q.ConversationID, ExpiresBefore: q.ExpiresBefore}
	if t := e.tools.now().visible(q.ToolName); t != nil && f.ServerID == "" {
		// A tool's calls all carry its server id (classify): naming it
		// lets the store read the server's parked calls only.
		f.ServerID = t.ServerID
	}
	if !p.SeesAll() {
		if p.KeyID == "" {
			return []agentd.ToolCall{}, "", nil // no key, no conversations of its own (fail closed)
		}
		f.CreatedBy = p.KeyID // client and delegate keys: their own conversations
	}
	if q.Decidable {
		calls, next, err := e.decider.decidable(ctx, p, f, limit)
		if calls == nil && err == nil {
			calls = []agentd.ToolCall{}
		}
		return calls, next, err
	}
	calls, err := e.store.PendingToolCalls(ctx, f)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(calls) > limit {
		calls = calls[:limit]
		next = calls[limit-1].ID
	}
	if calls == nil {
		calls = []agentd.ToolCall{}
	}
	return calls, next, nil
}

// Audit returns up to q.Limit (1..100, default 50) entries of the audit
// log of the principal's tenant and project that match q, after its cursor
// (an entry id; 0 for the first page), and the cursor of the next page (0
// at the end). Operator and admin keys only (EFORBIDDEN otherwise);
// EINVALID for an unknown kind, a malformed id, a limit out of range.
func (e *Engine) Audit(ctx context.Context, p agentd.Principal, q agentd.AuditQuery) ([]agentd.AuditEntry, int64, error) {
	if !p.SeesAll() {
		return nil, 0, agentd.Errorf(agentd.EFORBIDDEN, "the audit log needs an operator or admin key")
	}
	limit := q.Limit
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > 100 {
		return nil, 0, agentd.Errorf(agentd.EINVALID, "limit must be between 1 and 100")
	}
	if q.Kind != "" && !slices.Contains(agentd.AuditKinds, q.Kind) {
		return nil, 0, agentd.Errorf(agentd.EINVALID, "kind must be one of %s", strings.Join(agentd.AuditKinds, ", "))
	}
	if q.Cursor < 0 {
		return nil, 0, agentd.Errorf(agentd.EINVALID, "cursor must not be negative")
	}
	for _, id := range []struct{ prefix, what, v string }{
		{agentd.PrefixToolCall, "tool_call_id", q.ToolCallID}, {agentd.PrefixConversation, "conversation_id", q.ConversationID},
	} {
		if id.v != "" {
			if err := agentd.CheckID(id.prefix, id.what, id.v); err != nil {
				return nil, 0, err
			}
		}
	}
	es, err := e.store.Audit(ctx, agentd.AuditFilter{TenantID: p.TenantID, ProjectID: p.ProjectID, Kind: q.Kind,
		ToolCallID: q.ToolCallID, ConversationID: q.ConversationID, Since: q.Since, Until: q.Until,
		After: q.Cursor, Limit: limit + 1})
	if err != nil {
		return nil, 0, err
	}
	var next int64
	if len(es) > limit {
		es = es[:limit]
		next = es[limit-1].ID
	}
	if es == nil {
		es = []agentd.AuditEntry{}
	}
	return es, next, nil
}

// nilIfEmpty is s for an event field that is null when empty.
func nilIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ToolCall returns a call of a conversation the principal reaches, with
// its decisions and input requests; ENOTFOUND otherwise.
func (e *Engine) ToolCall(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error) {
	c, err := e.toolCall(ctx, p, id)
	if err != nil {
		return nil, err
	}
	return e.answers.callInputs(ctx, c)
}
