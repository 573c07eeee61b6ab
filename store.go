package agentd

import (
	"context"
	"encoding/json"
	"time"
)

// Store is the durable state of agentd: the sum of the role interfaces
// below. A backend implements Store; a consumer names only the roles it
// uses (or a smaller interface of its own), never Store itself — only the
// backends, storetest and the wiring (package server) do. Every method is one
// transaction; the events passed to a method are appended to their
// conversation's log in that same transaction and returned with their
// assigned sequence numbers and feed positions, so state and its
// announcement commit together. Implementations: sqlite (embedded
// default); the contract every implementation must pass is storetest.Run,
// organised by role (storetest.RunConversations, RunRuns, and so on).
//
// Group commit (SPEC §8.1): a backend may, and SQLite does, run the
// transactions of concurrent calls in one database transaction with one
// commit: writes that arrive while a commit is in flight share the next.
// What every caller may rely on stays as if each call committed alone: a
// call returns only after the commit that holds its writes, with its own
// events (its events of one conversation with consecutive Seq) and its own
// error; a call that fails (ECONFLICT, ENOTFOUND, EINVALID, …) writes
// nothing and fails no other call of its group, whose calls run one after
// the other, each seeing the writes of those before it, so a conditional
// transition still has exactly one winner; when the shared commit fails,
// every call in it fails and nothing of any of them is stored or returned
// (and so nothing is published). See docs/storage.md; storetest's
// GroupCommit cases check it.
//
// Feed positions: every appended event also gets an Event.Position, unique
// over all events of all conversations and assigned in the appending
// transaction so that position order is commit order: once a reader has
// seen an event at position P, no event with a position below P can
// commit later. (SQLite gets this from its single writer; PostgreSQL must
// take a lock or a commit-ordered counter in the appending transaction, see
// docs/storage.md.) Within a conversation, position order is Seq order.
//
// Lookups by id do no tenant check; callers compare TenantID/ProjectID and
// answer ENOTFOUND on mismatch.
//
// The audit log (AuditEntry) is written by the store itself, in the
// transaction of the fact it records, so no fact commits without its entry
// and no entry without its fact: every decision inserted (by UpdateToolCall,
// UpdateToolCalls or CancelRun) gets an entry of kind decision (approved,
// denied), expiry or cancellation with the decision's DecidedBy, Role, Via,
// reason and digests; every call stored as refused (inserted, or moved
// there by an update) gets a refusal; every call stored in
// requires_confirmation with Escalated gets an escalation; every appended
// event draft with an Audit entry (a subagent's refusal) gets that entry,
// with the event's conversation, tenant and project. Where an entry is kept
// is the backend's choice (SQLite and PostgreSQL read a decision's entry
// from its decision row, docs/audit.md); Audit lists every kind as one log,
// ids increasing in commit order across all of them (storetest's
// Audit/Interleaved).
type Store interface {
	ConversationStore
	RunStore
	ToolCallStore
	EventLog
	AuditLog
	ThreadStore
	WebhookOutbox
	ScheduleStore
	GrantStore
	Health
	ChildJournal
	LinkStore
	InputStore
	// Close releases the store; no method may be called after it.
	Close() error
}

// ConversationStore holds conversations and their messages.
type ConversationStore interface {
	// CreateConversation inserts c. EINVALID if c.ID is empty.
	CreateConversation(ctx context.Context, c *Conversation) error
	// Conversation returns the conversation, with the Seq of its newest
	// event as of the read in LastSeq, or ENOTFOUND.
	Conversation(ctx context.Context, id string) (*Conversation, error)
	// AddMessage inserts an assistant (or user) message and appends events.
	AddMessage(ctx context.Context, m *Message, events []EventDraft) ([]Event, error)
	// Messages returns a conversation's messages in insertion order.
	Messages(ctx context.Context, conversationID string) ([]Message, error)
	// MessagesAfter returns a conversation's messages inserted after the
	// message afterID, in insertion order (every message when afterID is
	// empty): messages are only ever appended, so a reader holding them up
	// to afterID reads only the rest, from an index, however many it holds.
	// ENOTFOUND if afterID is not a message of the conversation.
	MessagesAfter(ctx context.Context, conversationID, afterID string) ([]Message, error)
}

// RunStore holds runs and records their model steps.
type RunStore interface {
	// StartRun inserts the user message and the run (whose Status must be
	// running) and appends events, atomically. ERUNACTIVE if the
	// conversation already has a running or waiting run.
	StartRun(ctx context.Context, run *Run, msg *Message, events []EventDraft) ([]Event, error)
	// Run returns a run, or ENOTFOUND.
	Run(ctx context.Context, id string) (*Run, error)
	// UpdateRun applies u if the run's current status is in u.From (any
	// status when From is empty) and appends events. ECONFLICT, with the
	// current run returned, when the status does not match; ENOTFOUND when
	// there is no such run.
	UpdateRun(ctx context.Context, u RunUpdate, events []EventDraft) (*Run, []Event, error)
	// CancelRun cancels an active run in one transaction: the run becomes
	// cancelled with reason; every call of the run that has not started
	// (requires_confirmation, requires_input or approved) becomes
	// cancelled, each one that was requires_confirmation gets a
	// "cancelled" decision by `by` (DecidedBy its key id, Role its role,
	// Via ViaCancel), and each pending input of one that was
	// requires_input becomes cancelled with reason run_cancelled (the
	// call handed to plan carries them, as they were, in Inputs);
	// then the events returned by plan (given the cancelled run and those
	// calls as they were before) are appended. It returns the run and the
	// events. ECONFLICT, with the current run, when the run is not active;
	// ENOTFOUND when there is no such run. On any error nothing is written.
	CancelRun(ctx context.Context, runID, reason string, by Actor, now time.Time,
		plan func(run *Run, cancelled []ToolCall) []EventDraft) (*Run, []Event, error)
	// RunsToDrive returns the active runs something must happen to now:
	// every run in running state, and every waiting run none of whose calls
	// at its current step is held (CallStatus.Held: requires_confirmation
	// or requires_input; its held calls were all decided, answered,
	// expired or cancelled and nothing moved it on, as after a crash). A
	// waiting run with a held call at its current step is not among them:
	// it waits for a decision, an answer, an expiry or a cancel. Finished
	// runs never are. The work is one indexed query, not a read per run.
	RunsToDrive(ctx context.Context) ([]Run, error)

	// RecordStep atomically records one model step of a run: it requires the
	// run to be running or waiting with Step == r.Step-1 (ECONFLICT
	// otherwise, nothing written), inserts r.Message (when non-nil) and
	// r.Calls, sets the run's Step to r.Step and its status to running (to
	// r.End, with r.EndReason, for a step that ends its run), adds r.Usage
	// to the run's usage, and appends events. EINVALID for an End that is
	// not completed or failed, or with calls.
	RecordStep(ctx context.Context, r StepRecord, events []EventDraft) ([]Event, error)

	// LeaseRun takes or renews owner's lease of an active run until
	// until, for replicas sharing the store (docs/scale-out.md): it
	// reports true when the run is active and its lease was free, expired
	// (its until not after now) or owner's already; false, writing
	// nothing, when another owner's lease is live, the run is not active
	// or there is no such run. EINVALID for an empty owner or until not
	// after now.
	LeaseRun(ctx context.Context, runID, owner string, now, until time.Time) (bool, error)
	// ReleaseRun frees owner's lease of a run; it does nothing when the
	// lease is another owner's or free. EINVALID for an empty owner.
	ReleaseRun(ctx context.Context, runID, owner string) error
}

// ToolCallStore holds tool calls, their conditional state transitions
// and decisions, and the parked calls' lists and deadlines.
// MaxDuePage is the most calls one DueToolCalls page returns.
const MaxDuePage = 1000

// DuePage is a DueToolCalls limit as the stores apply it: within
// 1..MaxDuePage, MaxDuePage outside.
func DuePage(limit int) int {
	if limit < 1 || limit > MaxDuePage {
		return MaxDuePage
	}
	return limit
}

type ToolCallStore interface {
	// CreateToolCalls inserts calls and appends events atomically.
	CreateToolCalls(ctx context.Context, calls []*ToolCall, events []EventDraft) ([]Event, error)
	// ToolCall returns one call with its decisions, or ENOTFOUND.
	ToolCall(ctx context.Context, id string) (*ToolCall, error)
	// ToolCalls returns a conversation's calls in (creation, step, index) order, with decisions.
	ToolCalls(ctx context.Context, conversationID string) ([]ToolCall, error)
	// RunToolCalls returns the calls of one run in (step, index) order.
	RunToolCalls(ctx context.Context, runID string) ([]ToolCall, error)
	// MessageToolCalls returns the calls of a conversation made by the
	// messages named, in ToolCalls' order, with decisions; at most 1,000
	// message ids (EINVALID beyond).
	MessageToolCalls(ctx context.Context, conversationID string, messageIDs []string) ([]ToolCall, error)
	// ToolCallsAfter returns the calls made by a conversation's messages
	// inserted after the message afterMessageID (by all of its messages
	// when afterMessageID is empty), in ToolCalls' order, with decisions:
	// one read however many messages follow the cursor, from indexes, however many
	// precede it (MessagesAfter's cursor). ENOTFOUND if afterMessageID is
	// not a message of the conversation.
	ToolCallsAfter(ctx context.Context, conversationID, afterMessageID string) ([]ToolCall, error)
	// UpdateToolCall is the one conditional state transition of a call:
	// it applies u only if the current status is in u.From (and, with
	// u.CardRevision, the call still shows that card), inserts
	// u.Decision if set, and appends events, atomically. ECONFLICT, with
	// the current call returned, when the status does not match.
	UpdateToolCall(ctx context.Context, u CallUpdate, events []EventDraft) (*ToolCall, []Event, error)
	// UpdateToolCalls applies every update as UpdateToolCall would, and
	// appends events, all in one transaction: all or nothing. It returns
	// the updated calls in the order of us. ECONFLICT (naming the call)
	// when any call's status is not in its From, ENOTFOUND when a call does
	// not exist, EINVALID as UpdateToolCall, or when two updates name the
	// same call; on any error nothing is written.
	UpdateToolCalls(ctx context.Context, us []CallUpdate, events []EventDraft) ([]ToolCall, []Event, error)
	// ToolCallsByStatus returns every call in one of the statuses.
	ToolCallsByStatus(ctx context.Context, statuses ...CallStatus) ([]ToolCall, error)
	// PendingToolCalls returns up to f.Limit calls of f's tenant and project
	// (and, when f.CreatedBy is set, of conversations that key created) in
	// requires_confirmation after f.After that match f's other filters, in
	// ID order (ids are time-ordered; by deadline with f.ExpiresBefore),
	// with decisions: the reconcile list of parked approvals.
	PendingToolCalls(ctx context.Context, f PendingFilter) ([]ToolCall, error)
	// ParkedCount returns how many calls are in requires_confirmation, of
	// every tenant: one index count (the parked-calls gauge reads it on
	// every scrape).
	ParkedCount(ctx context.Context) (int64, error)
	// DueToolCalls returns up to limit calls in requires_confirmation
	// whose deadline is at or before now, earliest first: one page of the
	// deadline index (the expiry reads them a page at a time, however many
	// are due). A limit outside 1..MaxDuePage means MaxDuePage.
	DueToolCalls(ctx context.Context, now time.Time, limit int) ([]ToolCall, error)
	// ToolCallsDueBetween returns the calls in requires_confirmation whose
	// deadline is after after and at or before until, earliest first: one
	// range of the deadline index, however many calls are parked (the
	// reminders of calls another replica parked, loop/remind.go). EINVALID
	// when a bound is zero or until is before after.
	ToolCallsDueBetween(ctx context.Context, after, until time.Time) ([]ToolCall, error)
	// NextDeadline returns the earliest RequiresApprovalAt of the calls in
	// requires_confirmation that is after after (any, when after is zero),
	// in UTC, or the zero time when there is none: the instant the deadline
	// timer is armed to, and with after = now + a reminder offset the next
	// reminder at that offset (loop/remind.go). It reads one index entry,
	// however many calls are parked.
	NextDeadline(ctx context.Context, after time.Time) (time.Time, error)
}

// EventLog is the durable event log: each conversation's events by Seq,
// the feed of every event by Position, and the feed consumers' cursors.
type EventLog interface {
	// AppendEvents appends events to their conversations' logs.
	AppendEvents(ctx context.Context, events []EventDraft) ([]Event, error)
	// Events returns up to limit events of a conversation with Seq > afterSeq, in order.
	Events(ctx context.Context, conversationID string, afterSeq int64, limit int) ([]Event, error)
	// LastSeq returns the Seq of a conversation's newest committed event: 0
	// when it has none or does not exist.
	LastSeq(ctx context.Context, conversationID string) (int64, error)

	// EventsAfter returns the events of every conversation (or of f's
	// tenant, or tenant and project) with Position > f.After, in position
	// order, at most f.Limit of them (see FeedFilter): a page of the event
	// feed. EINVALID when f is invalid (FeedFilter.Check).
	EventsAfter(ctx context.Context, f FeedFilter) ([]Event, error)
	// LastPosition returns the Position of the newest committed event of any
	// conversation: 0 when there is none.
	LastPosition(ctx context.Context) (int64, error)
	// ConsumerPosition returns the position the named feed consumer last
	// recorded with SetConsumerPosition, 0 for a consumer that never did.
	// EINVALID when name is not a valid consumer name (CheckConsumerName).
	ConsumerPosition(ctx context.Context, name string) (int64, error)
	// SetConsumerPosition durably records that the named consumer has
	// processed the feed up to and including pos. A cursor never moves
	// backwards: a pos at or below the recorded one changes nothing and is
	// not an error (a consumer that redoes work after a restart may record
	// an older position again). EINVALID when name is not a valid consumer
	// name, when pos is negative, or when pos is past LastPosition (no
	// consumer can have processed an event that has not committed).
	SetConsumerPosition(ctx context.Context, name string, pos int64) error
}

// AuditLog is the audit log's own writes and its reads (the store writes
// the entries of its own facts itself, see Store).
type AuditLog interface {
	// AppendAudit appends an entry the store does not write by itself (a
	// durable-path request) and returns it with its ID. EINVALID when its
	// Kind is not one of AuditKinds or TenantID or ProjectID is empty.
	AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error)
	// Audit returns up to f.Limit entries of f's tenant and project that
	// match f, with ID > f.After, in ID order. EINVALID when f.TenantID or
	// f.ProjectID is empty or f.Kind is set and not one of AuditKinds.
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}

// ScheduleStore holds the claims of scheduled tools' ticks (package
// schedule): whichever replicas run, each tick of a tool is claimed by one
// of them, once.
type ScheduleStore interface {
	// ClaimTick claims tick at of the scheduled tool. claimed is true for
	// the first claim of (tool, at) and false for every later one (another
	// replica's, or a repeat). prev is the latest tick of tool claimed
	// before this claim, read in the same transaction (zero when none);
	// it is set only when claimed. EINVALID when tool is empty or at is the
	// zero time (or out of the times the store holds).
	ClaimTick(ctx context.Context, tool string, at time.Time) (prev time.Time, claimed bool, err error)
}

// ChildJournal is the journal of durable tools' child calls (package
// tools/callcontext, docs/runtime.md): each child request a durable tool's
// call makes through its context endpoint is keyed by the tenant, the
// parent call's id and its ordinal in the call (1, 2, …), and its result is
// recorded once it succeeded, so a re-run of the call after a crash gets
// the journaled result instead of sending the child again.
type ChildJournal interface {
	// JournaledChild returns the entry of (tenantID, callID, ordinal);
	// ENOTFOUND when there is none (another tenant's entry is none).
	JournaledChild(ctx context.Context, tenantID, callID string, ordinal int) (*JournalEntry, error)
	// JournalChild records e. ECONFLICT when (TenantID, ToolCallID,
	// Ordinal) is recorded already (the first entry stays); EINVALID when
	// TenantID, ToolCallID or Digest is empty or Ordinal is below 1.
	JournalChild(ctx context.Context, e JournalEntry) error
}

// JournalEntry is one journaled child call of a durable tool's call.
type JournalEntry struct {
	TenantID   string
	ToolCallID string
	// Ordinal is the child's place among the call's child requests: the
	// n-th one the call made.
	Ordinal int
	// Digest is the lowercase hex SHA-256 that identifies the child's
	// request (what it asked, of whom).
	Digest string
	// Result is the child's answer as the tool got it (JSON).
	Result    json.RawMessage
	CreatedAt time.Time
}

// ThreadStore binds chat protocols' thread names to conversations.
type ThreadStore interface {
	// BindThread binds a chat protocol's thread (an AG-UI threadId, an AI
	// SDK chat id: a name the client chose) to a conversation, scoped by
	// tenant, project, API key and protocol (b.ThreadKey), and returns the
	// conversation the thread is bound to: b.ConversationID when the thread
	// was unbound, else the conversation of the existing binding (the first
	// binding wins; a thread is never rebound). EINVALID when a field of b
	// is empty; ENOTFOUND when b.ConversationID does not exist.
	BindThread(ctx context.Context, b ThreadBinding) (string, error)
	// ThreadConversation returns the conversation the thread k names is
	// bound to, or ENOTFOUND (also for a key with an empty field).
	ThreadConversation(ctx context.Context, k ThreadKey) (string, error)
}

// WebhookOutbox is the webhook outbox: deliveries, their leases and
// attempts, and the endpoints' recorded state.
type WebhookOutbox interface {
	// EnqueueWebhookDeliveries inserts the deliveries (the webhook outbox)
	// and records the named consumer's position pos, as SetConsumerPosition
	// does, in one transaction. A delivery whose ID exists is left as it is
	// (re-enqueueing after a crash changes nothing). Each delivery is
	// inserted pending with its NextAttemptAt (required) and no attempts.
	// EINVALID for an invalid consumer name or position, or a delivery
	// without ID, endpoint, tenant, project or a JSON body.
	EnqueueWebhookDeliveries(ctx context.Context, consumer string, pos int64, ds []WebhookDelivery) error
	// ClaimWebhookDeliveries leases up to c.Limit pending deliveries of
	// c.EndpointID due at c.Now (NextAttemptAt <= Now) and not leased by
	// another claimer until after c.Now, oldest due first, to c.Owner
	// until c.LeaseUntil, and returns them (without attempts). EINVALID
	// without endpoint or owner.
	ClaimWebhookDeliveries(ctx context.Context, c WebhookClaim) ([]WebhookDelivery, error)
	// RecordWebhookAttempt appends r.Attempt to the delivery's attempts and
	// sets its status (and NextAttemptAt when pending), releasing the
	// lease, if the delivery is pending and leased to r.Owner. ECONFLICT
	// when it is not (the lease lapsed and another claimer took it, or an
	// operator redelivered it); ENOTFOUND when there is no such delivery.
	RecordWebhookAttempt(ctx context.Context, r WebhookAttemptRecord) error
	// WebhookDeliveries returns a page of f's deliveries, newest first,
	// with attempts. EINVALID for an invalid filter.
	WebhookDeliveries(ctx context.Context, f WebhookDeliveryFilter) ([]WebhookDelivery, error)
	// WebhookDelivery returns one delivery with its attempts, or ENOTFOUND.
	WebhookDelivery(ctx context.Context, id string) (*WebhookDelivery, error)
	// RedeliverWebhook makes a delivery pending, due at now, whatever its
	// status, dropping any lease; its attempts stay. ENOTFOUND when there
	// is no such delivery.
	RedeliverWebhook(ctx context.Context, id string, now time.Time) (*WebhookDelivery, error)
	// NextWebhookAttempt returns the earliest NextAttemptAt of the pending
	// deliveries of an endpoint (leased ones included: their lease may
	// lapse), the zero time when there is none. It reads one index entry.
	NextWebhookAttempt(ctx context.Context, endpointID string) (time.Time, error)
	// WebhookQueueDepth returns the number of pending deliveries of each
	// endpoint that has any: of every tenant when tenantID and projectID
	// are both empty (the metrics), else only those of that tenant and
	// project (what its operators see). EINVALID for one without the other.
	WebhookQueueDepth(ctx context.Context, tenantID, projectID string) (map[string]int64, error)
	// WebhookEndpointStates returns the recorded state of every endpoint
	// that has one, by id.
	WebhookEndpointStates(ctx context.Context) ([]WebhookEndpointState, error)
	// SetWebhookEndpointState records st (replacing the endpoint's state).
	// EINVALID without id.
	SetWebhookEndpointState(ctx context.Context, st WebhookEndpointState) error
}

// LinkStore holds decision links' state (SPEC §11.4, package links): the
// server's signing secret when AGENTD_LINK_SECRET is not set, and the links
// already used.
type LinkStore interface {
	// LinkSecret returns the stored signing secret, storing candidate
	// first when none is stored: every replica and restart gets the secret
	// the first caller stored. EINVALID for a candidate under 32 bytes.
	LinkSecret(ctx context.Context, candidate []byte) ([]byte, error)
	// SpendLink records the link id (a token's nonce) as used for call
	// toolCallID at at: true for the first use, false for every later one
	// (a repeat, or a concurrent use that lost). EINVALID without id.
	SpendLink(ctx context.Context, id, toolCallID string, at time.Time) (bool, error)
	// LinkSpent reports whether the link id was used.
	LinkSpent(ctx context.Context, id string) (bool, error)
}

// GrantStore holds remembered grants (SPEC §11.2). A grant is created by
// the approval that makes it (CallUpdate.Grant), in the decision's
// transaction.
type GrantStore interface {
	// Grant returns one grant, revoked or expired ones too, or ENOTFOUND.
	Grant(ctx context.Context, id string) (*Grant, error)
	// Grants returns up to f.Limit grants of f's tenant and project (and,
	// with f.ConversationCreatedBy, made in conversations that key
	// created) that are neither revoked nor expired at now, with ID >
	// f.After, in ID order. EINVALID without tenant or project.
	Grants(ctx context.Context, f GrantFilter, now time.Time) ([]Grant, error)
	// ActiveGrants returns the grants that may apply to a call of
	// q.ToolName in q.ConversationID: of q's tenant and project, not
	// revoked, expiring after q.Now, of scope project or of scope
	// conversation made in q.ConversationID; in ID order. It reads one
	// index range. EINVALID when a field of q is empty.
	ActiveGrants(ctx context.Context, q GrantQuery) ([]Grant, error)
	// RevokeGrant revokes a grant that is not revoked yet, as by at now,
	// writes its AuditGrantRevoked entry and appends events, atomically.
	// ECONFLICT, with the grant, when it was revoked already; ENOTFOUND
	// when there is no such grant.
	RevokeGrant(ctx context.Context, id string, by Actor, now time.Time, events []EventDraft) (*Grant, []Event, error)
}

// InputStore holds input requests (SPEC §12). An input is created with its
// call's park (StepRecord.Inputs, in RecordStep's transaction) and
// resolved exactly once.
type InputStore interface {
	// Input returns an input, or ENOTFOUND.
	Input(ctx context.Context, id string) (*Input, error)
	// Inputs lists the inputs matching f in ID order (EINVALID without
	// its tenant and project).
	Inputs(ctx context.Context, f InputFilter) ([]Input, error)
	// ResolveInput applies r in one transaction: the input moves from
	// pending to r.Status with r's answer, its call from requires_input
	// to r.CallStatus with r.Result (the call's run's parked count kept),
	// and events are appended. ECONFLICT, with the input as stored, when
	// it is not pending (or its call no longer waits on it); ENOTFOUND
	// when there is no such input. Of concurrent resolutions exactly one
	// commits; on any error nothing is written.
	ResolveInput(ctx context.Context, r InputResolution, events []EventDraft) (*Input, []Event, error)
	// DueInputs returns at most limit (DuePage) pending inputs whose
	// ExpiresAt is at or before now, earliest first.
	DueInputs(ctx context.Context, now time.Time, limit int) ([]Input, error)
	// NextInputDeadline returns the earliest ExpiresAt of a pending input,
	// the zero time when none is pending.
	NextInputDeadline(ctx context.Context) (time.Time, error)
}

// Health reports on the store for readiness.
type Health interface {
	// Ping reports whether the store is usable (readiness).
	Ping(ctx context.Context) error
}

// ThreadKey names a chat protocol's thread: a name an API key chose, in its
// tenant and project. Two tenants, two projects, two keys or two protocols
// using the same thread id name two threads.
type ThreadKey struct {
	TenantID, ProjectID string
	// KeyID is the API key whose name this is (Principal.KeyID).
	KeyID string
	// Protocol is the protocol whose thread ids these are ("ag-ui", "ai-sdk").
	Protocol string
	ThreadID string
}

// ThreadBinding binds a thread to a conversation (ThreadStore.BindThread).
type ThreadBinding struct {
	ThreadKey
	ConversationID string
	CreatedAt      time.Time
}

// RunUpdate is a conditional change of a run.
type RunUpdate struct {
	ID     string
	From   []RunStatus
	Status RunStatus
	Reason string
	Step   *int   // set when non-nil
	Usage  *Usage // set when non-nil
	Now    time.Time
}

// CallUpdate is a conditional change of a tool call.
type CallUpdate struct {
	ID     string
	From   []CallStatus
	Status CallStatus
	// CardRevision, when not 0, is the card the update was planned against
	// (ToolCall.CardRevision): the update applies only while the call
	// still has CardRevision-1 decisions, so a decision planned on a card is
	// ECONFLICT once the call was decided and parked again meanwhile.
	CardRevision int
	// Result and Error are set when non-empty.
	Result json.RawMessage
	Error  string
	// Decision, when set, is inserted in the same transaction.
	Decision *Decision
	// Edit, when set, replaces the call's arguments and classification
	// (an approval with edited arguments).
	Edit *CallEdit
	// Repark, when set, replaces the call's classification and card for
	// a call parked again (Status requires_confirmation) because what it
	// would do changed after it was cleared to run.
	Repark *CallRepark
	// Approvals, when set, records an approval of a call whose quorum it
	// does not reach yet (SPEC §11.1): the call's approvals on its current
	// card become Approvals.After, only while they are Approvals.Before
	// many and the call has an approval rule (else ECONFLICT: another
	// approval won the race). A re-park clears them.
	Approvals *ApprovalsUpdate
	// Governance, when set, records a reminder or an extension of a
	// parked call (SPEC §11.3); see GovernanceUpdate.
	Governance *GovernanceUpdate
	// Grant, when set, is a remembered grant (SPEC §11.2) inserted in the
	// same transaction, with its AuditGrantCreated entry by the decision's
	// DecidedBy: only with a Decision of DecisionApproved (else EINVALID;
	// CheckGrant's EINVALID cases too; an existing ID is ECONFLICT).
	Grant *Grant
	Now   time.Time
}

// GovernanceUpdate is CallUpdate.Governance: it applies only while the
// call has an approval rule, its deadline is Deadline and it has
// RemindedBefore reminders recorded (else ECONFLICT: a reminder, an
// extension or a re-park won the race). The call's reminders become
// Reminded and the total of its extensions Extended (always written: a
// reminder passes the call's own); with NewDeadline set, its deadline
// becomes NewDeadline.
type GovernanceUpdate struct {
	Deadline       time.Time
	RemindedBefore int
	Reminded       []Reminder
	NewDeadline    time.Time
	Extended       time.Duration
}

// ApprovalsUpdate is CallUpdate.Approvals.
type ApprovalsUpdate struct {
	Before int
	After  []Approval
}

// CallRepark is the new classification of a call that is parked again:
// its effective arguments, tier, reason, card diff and state digest and the
// new deadline. The call's earlier decisions stay in its history.
type CallRepark struct {
	Arguments          json.RawMessage
	ArgumentsSHA256    string
	Tier               Tier
	Reason             string
	Escalated          bool
	AllowedDecisions   []string
	Diff               string
	StateSHA256        string
	RequiresApprovalAt time.Time
	// A connection call's resolved request, as for CallEdit.
	Method, Endpoint, PathTemplate string
	Params                         json.RawMessage
	// Approval, when set, is the new card's approval rule; nil keeps the
	// call's. Either way the approvals of the earlier card are cleared.
	Approval *ApprovalRule
}

// CallEdit is the re-classified call after an approver edited its arguments.
type CallEdit struct {
	Arguments       json.RawMessage
	ArgumentsSHA256 string
	Tier            Tier
	Reason          string
	Escalated       bool
	Method          string
	Endpoint        string
	PathTemplate    string
	Params          json.RawMessage
}

// StepRecord is one model step: the assistant message and the calls it made.
type StepRecord struct {
	RunID string
	Step  int
	Usage Usage
	// StopReason is the provider's stop reason of the step.
	StopReason string
	Message    *Message // nil when the step produced neither text nor calls
	Calls      []*ToolCall
	// Inputs are the input requests of the step's calls in requires_input
	// (SPEC §12), each created with its call's park.
	Inputs []*Input
	Now    time.Time
	// End, when set, finishes the run with the step, in its transaction:
	// the run's status becomes End (completed or failed) and its reason
	// EndReason, instead of running. A step that ends its run makes no
	// calls.
	End       RunStatus
	EndReason string
}

// PendingFilter selects parked calls for ToolCallStore.PendingToolCalls.
type PendingFilter struct {
	TenantID, ProjectID string
	// CreatedBy, when set, keeps only calls of conversations created by
	// that API key id (what a client key may list).
	CreatedBy string
	// ToolName, ServerID and ConversationID, when set, keep only the
	// calls with that tool name, server id or conversation.
	ToolName, ServerID, ConversationID string
	// ExpiresBefore, when not zero, keeps only calls whose deadline is
	// before it, and orders them by deadline, then ID: After then names the
	// last call of the previous page, and the page goes on after its
	// deadline and ID.
	ExpiresBefore time.Time
	// After is the cursor: only calls with a greater ID.
	After string
	// Limit bounds the result (1..1000; other values mean 1000).
	Limit int
}
