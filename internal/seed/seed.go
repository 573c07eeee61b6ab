// Package seed fills an agentd SQLite database with many parked calls at
// once, for the tests and benchmarks of parked-call scale: each call in its
// own conversation, with a waiting run whose first step parked it — the
// state the loop leaves a run in when its only call awaits a decision.
//
// Writing that through the store one run at a time costs four fsynced
// transactions per run (minutes for 100,000). Here the conversations, runs
// and messages of a batch are inserted in one transaction on a connection
// of their own, and the calls and events of the batch in one
// Store.CreateToolCalls, so the calls and the log are written by the
// store's own code. Its test checks that a seeded run reads back through
// the store as the loop leaves a parked run. Nothing but tests and
// benchmarks uses it.
package seed

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/sqlite"
)

// Parked describes the parked runs Write adds.
type Parked struct {
	TenantID, ProjectID string
	// CreatedBy is the API key id that created the conversations.
	CreatedBy string
	Agent     string
	// Tool names a requires-confirmation custom tool of the project; each
	// run's one call is to it, with Arguments (default {}).
	Tool      string
	Arguments json.RawMessage
	// Message is the user message that started each run (default "go").
	Message string
	// Now is when the runs started and their calls parked (default: now).
	Now time.Time
	// Deadline returns the requires_approval_at of the i-th call (0-based);
	// default: Now plus 15 minutes.
	Deadline func(i int) time.Time
	// Batch is the number of runs per transaction (default 5,000).
	Batch int
}

// Write adds n parked runs to the SQLite database at path (creating and
// migrating it if needed) and returns their tool call ids in creation
// order. No other process may use the file meanwhile. The calls are
// classified by confirm.Classify as the loop classifies a call of a
// requires-confirmation custom tool.
func (p Parked) Write(ctx context.Context, path string, n int) ([]string, error) {
	p.defaults()
	store, err := sqlite.Open(path)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	// The rows the store has no bulk method for go through a connection
	// of their own; each batch is committed before the store's
	// transaction that references it.
	raw, err := sql.Open("sqlite", "file:"+(&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath()+
		"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(OFF)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	raw.SetMaxOpenConns(1)

	ids := make([]string, 0, n)
	for start := 0; start < n; start += p.Batch {
		b := p.batch(start, min(p.Batch, n-start))
		if err := insertRows(ctx, raw, b); err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
		if _, err := store.CreateToolCalls(ctx, b.calls, b.events); err != nil {
			return nil, fmt.Errorf("seed: %w", err)
		}
		for _, c := range b.calls {
			ids = append(ids, c.ID)
		}
	}
	return ids, nil
}

func (p *Parked) defaults() {
	if p.TenantID == "" {
		p.TenantID = "default"
	}
	if p.ProjectID == "" {
		p.ProjectID = "default"
	}
	if len(p.Arguments) == 0 {
		p.Arguments = json.RawMessage(`{}`)
	}
	if p.Message == "" {
		p.Message = "go"
	}
	if p.Now.IsZero() {
		p.Now = time.Now()
	}
	p.Now = p.Now.UTC()
	if p.Deadline == nil {
		at := p.Now.Add(15 * time.Minute)
		p.Deadline = func(int) time.Time { return at }
	}
	if p.Batch <= 0 {
		p.Batch = 5000
	}
}

// batch is what one pair of transactions writes.
type batch struct {
	convs  []agentd.Conversation
	runs   []agentd.Run
	msgs   []agentd.Message // a user and an assistant message per run
	calls  []*agentd.ToolCall
	events []agentd.EventDraft
}

// batch builds runs first..first+n-1.
func (p *Parked) batch(first, n int) batch {
	d := confirm.Classify(confirm.Call{Name: p.Tool, Arguments: p.Arguments, Tool: &confirm.Tool{
		Name: p.Tool, ServerID: "tools", Exposure: confirm.ExposureRequiresConfirmation,
	}})
	var b batch
	for i := first; i < first+n; i++ {
		conv := agentd.Conversation{ID: agentd.NewID(agentd.PrefixConversation), TenantID: p.TenantID, ProjectID: p.ProjectID,
			Agent: p.Agent, CreatedBy: p.CreatedBy, CreatedAt: p.Now}
		run := agentd.Run{ID: agentd.NewID(agentd.PrefixRun), ConversationID: conv.ID, TenantID: p.TenantID, ProjectID: p.ProjectID,
			CorrelationID: agentd.NewCorrelationID(), Status: agentd.RunWaiting, Step: 1, StopReason: "tool_calls",
			CreatedAt: p.Now, UpdatedAt: p.Now}
		user := agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID,
			Role: agentd.RoleUser, Content: p.Message, CreatedAt: p.Now}
		asst := agentd.Message{ID: agentd.NewID(agentd.PrefixMessage), ConversationID: conv.ID, RunID: run.ID,
			Role: agentd.RoleAssistant, CreatedAt: p.Now}
		deadline := p.Deadline(i).UTC()
		c := &agentd.ToolCall{ID: agentd.NewID(agentd.PrefixToolCall), TenantID: p.TenantID, ProjectID: p.ProjectID,
			ConversationID: conv.ID, RunID: run.ID, CorrelationID: run.CorrelationID, MessageID: asst.ID, Step: 1,
			Name: p.Tool, ServerID: d.ServerID, Arguments: d.Arguments, ArgumentsSHA256: d.Digest, Tier: d.Tier,
			Reason: d.Reason, Method: d.Method, Endpoint: d.Endpoint, AllowedDecisions: d.AllowedDecisions,
			Status: agentd.StatusRequiresConfirmation, RequiresApprovalAt: &deadline, CreatedAt: p.Now, UpdatedAt: p.Now}
		b.convs = append(b.convs, conv)
		b.runs = append(b.runs, run)
		b.msgs = append(b.msgs, user, asst)
		b.calls = append(b.calls, c)
		b.events = append(b.events, events(run, c, p.Now)...)
	}
	return b
}

// events are the log of a parked run: run_started, confirmation_required
// and run_waiting, as the loop writes them for a custom tool's call.
func events(run agentd.Run, c *agentd.ToolCall, now time.Time) []agentd.EventDraft {
	payloads := []agentd.EventPayload{
		&agentd.RunStartedPayload{RunID: run.ID, CorrelationID: run.CorrelationID},
		&agentd.ConfirmationRequiredPayload{
			RunID: run.ID, CorrelationID: run.CorrelationID, ToolCallID: c.ID, ToolName: c.Name, ServerID: c.ServerID,
			Endpoint: c.Endpoint, Method: c.Method, Reason: c.Reason, Params: c.Arguments,
			ArgumentsSHA256: c.ArgumentsSHA256, RequiresApprovalAt: *c.RequiresApprovalAt, AllowedDecisions: c.AllowedDecisions,
			Card: agentd.Card{Title: fmt.Sprintf("Run %s?", c.Name), Summary: c.Reason, Method: c.Method, Endpoint: c.Endpoint,
				Arguments: c.Arguments},
		},
		&agentd.RunWaitingPayload{RunID: run.ID, CorrelationID: run.CorrelationID, Pending: []string{c.ID}},
	}
	out := make([]agentd.EventDraft, len(payloads))
	for i, p := range payloads {
		d, err := agentd.NewEventDraft(run.ConversationID, now, p)
		if err != nil {
			panic(err) // every required field is set above
		}
		out[i] = d
	}
	return out
}

// insertRows inserts the conversations, runs and messages of b in one
// transaction, with the column encodings of package sqlite (times as unix
// nanoseconds).
func insertRows(ctx context.Context, db *sql.DB, b batch) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmts := []string{
		`INSERT INTO conversations (id, tenant_id, project_id, agent, delegated, created_by, created_at) VALUES (?, ?, ?, ?, 0, ?, ?)`,
		`INSERT INTO runs (id, conversation_id, tenant_id, project_id, correlation_id, status, step, reason,
			input_tokens, output_tokens, created_at, updated_at, stop_reason) VALUES (?, ?, ?, ?, ?, ?, ?, '', 0, 0, ?, ?, ?)`,
		`INSERT INTO messages (id, conversation_id, run_id, role, content, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
	}
	prepared := make([]*sql.Stmt, len(stmts))
	for i, q := range stmts {
		if prepared[i], err = tx.PrepareContext(ctx, q); err != nil {
			return err
		}
		defer prepared[i].Close()
	}
	for i, c := range b.convs {
		r := b.runs[i]
		if _, err := prepared[0].ExecContext(ctx, c.ID, c.TenantID, c.ProjectID, c.Agent, c.CreatedBy, c.CreatedAt.UnixNano()); err != nil {
			return err
		}
		if _, err := prepared[1].ExecContext(ctx, r.ID, r.ConversationID, r.TenantID, r.ProjectID, r.CorrelationID, r.Status, r.Step,
			r.CreatedAt.UnixNano(), r.UpdatedAt.UnixNano(), r.StopReason); err != nil {
			return err
		}
	}
	for _, m := range b.msgs {
		if _, err := prepared[2].ExecContext(ctx, m.ID, m.ConversationID, m.RunID, m.Role, m.Content, m.CreatedAt.UnixNano()); err != nil {
			return err
		}
	}
	return tx.Commit()
}
