// Package agentd holds the domain of the agentd server: conversations, runs,
// tool calls, decisions, the durable event log, tiers and the error
// vocabulary, plus the small interfaces (Store and its roles, Model, Clock)
// that the adapters implement. It imports no HTTP framework and no
// database driver; every other package depends inward on it.
package agentd

import (
	"encoding/json"
	"time"
)

// Tier is the confirmation tier of a tool call (SPEC §2).
type Tier string

// The tiers, from most to least permissive.
const (
	TierAuto    Tier = "auto"
	TierConfirm Tier = "confirm"
	TierReview  Tier = "review"
	TierNever   Tier = "never"
)

// Rank orders tiers: auto < confirm < review < never. Unknown tiers rank as never.
func (t Tier) Rank() int {
	switch t {
	case TierAuto:
		return 0
	case TierConfirm:
		return 1
	case TierReview:
		return 2
	default:
		return 3
	}
}

// Stricter returns the stricter of two tiers.
func Stricter(a, b Tier) Tier {
	if b.Rank() > a.Rank() {
		return b
	}
	return a
}

// CallStatus is the status of a tool call in the API and the stream.
type CallStatus string

// Tool call statuses (SPEC §1).
const (
	StatusRequiresConfirmation CallStatus = "requires_confirmation"
	// StatusRequiresInput is a call waiting on its input request (SPEC §12).
	StatusRequiresInput CallStatus = "requires_input"
	StatusApproved      CallStatus = "approved"
	StatusExecuting     CallStatus = "executing"
	StatusCompleted     CallStatus = "completed"
	StatusFailed        CallStatus = "failed"
	StatusDenied        CallStatus = "denied"
	StatusExpired       CallStatus = "expired"
	StatusRefused       CallStatus = "refused"
	StatusCancelled     CallStatus = "cancelled"
)

// Terminal reports whether no further transition can happen.
func (s CallStatus) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusDenied, StatusExpired, StatusRefused, StatusCancelled:
		return true
	}
	return false
}

// Held reports whether the call waits for a person: parked for a decision
// (requires_confirmation) or for an input (requires_input). A run whose
// step holds such a call waits; nothing but a person, a deadline or a
// cancel moves it (the parked count, runs.parked).
func (s CallStatus) Held() bool {
	return s == StatusRequiresConfirmation || s == StatusRequiresInput
}

// RunStatus is the state of a run.
type RunStatus string

// Run states (SPEC §1).
const (
	RunRunning   RunStatus = "running"
	RunWaiting   RunStatus = "waiting"
	RunCompleted RunStatus = "completed"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Active reports whether the run still holds its conversation.
func (s RunStatus) Active() bool { return s == RunRunning || s == RunWaiting }

// Roles of API keys.
const (
	RoleClient   = "client"
	RoleDelegate = "delegate"
	RoleOperator = "operator"
	RoleAdmin    = "admin"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	TenantID  string
	ProjectID string
	Role      string
	KeyID     string // "dev" in loopback dev mode
	// Groups are the key's groups (agentd.json api_keys[].groups), for
	// approvers "group:<name>" (SPEC §11.1).
	Groups []string
}

// APIKey is one configured API key (agentd.json api_keys). The key itself is
// never stored: SHA256 is the lowercase hex SHA-256 of it.
type APIKey struct {
	ID        string
	SHA256    string
	TenantID  string
	ProjectID string
	Role      string // RoleClient, RoleDelegate, RoleOperator or RoleAdmin
	Groups    []string
}

// Principal is the principal of a request made with key k.
func (k APIKey) Principal() Principal {
	return Principal{TenantID: k.TenantID, ProjectID: k.ProjectID, Role: k.Role, KeyID: k.ID, Groups: k.Groups}
}

// The principal ids the server itself acts or records as, besides the
// configured API keys: an api_keys entry may not take one (ReservedKeyIDs).
const (
	// DevKeyID is the one key of the development server (no api_keys,
	// loopback only): DevPrincipal.
	DevKeyID = "dev"
	// ScheduleKeyID is the key_id of a scheduled tool's runs and missed
	// ticks in the audit log (they act as a delegate of the tool's tenant
	// and project, with no API key), and the creator of its conversations.
	ScheduleKeyID = "schedule"
	// SystemKeyID is the key_id of what the server does by itself:
	// expiries, cancellations, refusals of model-selected calls.
	SystemKeyID = "system"
	// AnonymousKeyID stands for a principal without a key id in the
	// audit log and events.
	AnonymousKeyID = "anonymous"
)

// ReservedKeyIDs is every principal id the server itself uses; no
// configured API key may take one, or it would own what the server does.
var ReservedKeyIDs = []string{DevKeyID, ScheduleKeyID, SystemKeyID, AnonymousKeyID}

// DevPrincipal is every caller of the development server (no API keys
// configured, loopback only): an admin of the default tenant and project.
var DevPrincipal = Principal{TenantID: DefaultTenantID, ProjectID: DefaultProjectID, Role: RoleAdmin, KeyID: DevKeyID}

// Reaches reports whether p may see and act on the conversation (SPEC §5
// "Roles within a tenant and project"): it must be of p's tenant and project,
// and operator and admin keys reach all of those while client and delegate
// keys reach only the conversations they created. A conversation p does
// not reach is, for p, one that does not exist.
func (p Principal) Reaches(c *Conversation) bool {
	if c == nil || p.TenantID != c.TenantID || p.ProjectID != c.ProjectID {
		return false
	}
	return p.SeesAll() || (p.KeyID != "" && c.CreatedBy == p.KeyID)
}

// SeesAll reports whether p reaches every conversation of its tenant and
// project (operator and admin keys), not only those it created.
func (p Principal) SeesAll() bool { return p.Role == RoleOperator || p.Role == RoleAdmin }

// MayDecide reports whether p may decide approvals: every role but
// delegate (automations never approve their own calls).
func (p Principal) MayDecide() bool { return p.Role != RoleDelegate }

// Conversation is a chat thread with one agent.
type Conversation struct {
	ID        string          `json:"id"`
	TenantID  string          `json:"tenant_id"`
	ProjectID string          `json:"project_id"`
	Agent     string          `json:"agent"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	Delegated bool            `json:"delegated"`
	// CreatedBy is the id of the API key that created the conversation
	// ("dev" in dev mode): client and delegate keys reach only their own.
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	// LastSeq is the Seq of the conversation's newest event when it was
	// read (ConversationStore.Conversation), 0 for none; not part of the API's JSON.
	LastSeq int64 `json:"-"`
}

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is a user message or the assistant text of one model step. The
// tool calls an assistant message made are ToolCalls with its MessageID.
type Message struct {
	ID             string    `json:"id"`
	ConversationID string    `json:"conversation_id"`
	RunID          string    `json:"run_id"`
	Role           string    `json:"role"`
	Content        string    `json:"content"`
	CreatedAt      time.Time `json:"created_at"`
}

// Usage counts model tokens of a run.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Run is one pass of the agent loop, started by a user message.
type Run struct {
	ID             string    `json:"id"`
	ConversationID string    `json:"conversation_id"`
	TenantID       string    `json:"tenant_id"`
	ProjectID      string    `json:"project_id"`
	CorrelationID  string    `json:"correlation_id"`
	Status         RunStatus `json:"status"`
	Step           int       `json:"step"`
	Reason         string    `json:"reason,omitempty"`
	Usage          Usage     `json:"usage"`
	// StopReason is the provider's stop reason of the latest model step
	// ("end_turn", "tool_calls", "length", …).
	StopReason string `json:"stop_reason,omitempty"`
	// RequestedBy is the id of the API key that sent the message that
	// started the run (SPEC §11.1 requester_may_approve).
	RequestedBy string    `json:"requested_by,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	// TraceParent is the W3C traceparent of the run's span when traces are
	// on (docs/observability.md), empty otherwise; TraceCaller is the span
	// ID of the caller's traceparent the run continues, empty for a root.
	// Kept with the run so that a span ended after a restart joins its
	// run's trace.
	TraceParent string `json:"-"`
	TraceCaller string `json:"-"`
}

// ToolCall is one model-selected call and everything decided about it.
type ToolCall struct {
	ID             string `json:"id"`
	TenantID       string `json:"tenant_id"`
	ProjectID      string `json:"project_id"`
	ConversationID string `json:"conversation_id"`
	RunID          string `json:"run_id"`
	CorrelationID  string `json:"correlation_id"`
	// MessageID is the assistant message whose step made the call.
	MessageID string `json:"message_id"`
	Step      int    `json:"step"`
	Index     int    `json:"index"`
	Name      string `json:"name"`
	ServerID  string `json:"server_id"`
	// Arguments are the effective arguments (SPEC §1).
	Arguments       json.RawMessage `json:"arguments"`
	ArgumentsSHA256 string          `json:"arguments_sha256"`
	Tier            Tier            `json:"tier"`
	Reason          string          `json:"reason,omitempty"`
	Escalated       bool            `json:"escalated"`
	Status          CallStatus      `json:"status"`
	Method          string          `json:"method"`
	Endpoint        string          `json:"endpoint"`
	// Connection calls only: the connection, the path template and the
	// grouped arguments {path, query, header, body}.
	ConnectionName string          `json:"connection_name,omitempty"`
	PathTemplate   string          `json:"path_template,omitempty"`
	Params         json.RawMessage `json:"params,omitempty"`
	// RequiresApprovalAt is the decision deadline of a parked call.
	RequiresApprovalAt *time.Time      `json:"requires_approval_at,omitempty"`
	AllowedDecisions   []string        `json:"allowed_decisions,omitempty"`
	Result             json.RawMessage `json:"result,omitempty"`
	Error              string          `json:"error,omitempty"`
	// Diff is the unified diff of what the call would change, for a tool
	// whose source computes one (the file tools): the card's diff.
	Diff string `json:"diff,omitempty"`
	// StateSHA256 is the digest of the state outside the arguments that
	// the call was classified against (a file's content): an approval
	// applies only while that state still holds (loop: the re-park).
	StateSHA256 string `json:"state_sha256,omitempty"`
	// Approval is the approval rule the call was parked with (SPEC §11.1;
	// nil: DefaultApprovalRule), Approvals the approvals recorded on its
	// current card while its quorum is not reached.
	Approval  *ApprovalRule `json:"approval,omitempty"`
	Approvals []Approval    `json:"approvals,omitempty"`
	// Reminded are the reminders sent (SPEC §11.3), Extended the total of
	// its extensions; both are kept in the approval column.
	Reminded []Reminder    `json:"-"`
	Extended time.Duration `json:"-"`
	// GrantedBy names the remembered grant the call ran under without a
	// card (SPEC §11.2); kept in the approval column.
	GrantedBy *GrantRef `json:"granted_by,omitempty"`
	// Delegated is true while the call runs in a delegated context: a call
	// of a delegated conversation (SPEC §2.2), or one a delegate-role key
	// made on the invoke path or a schedule made. What the call does
	// through its context endpoint is classified as delegated, so
	// delegations.escalateConfirm applies to it (docs/runtime.md). Not
	// stored: whoever runs the call sets it (the engine from the call's
	// conversation, the direct runner from its caller's role), and a child
	// call has its parent's.
	Delegated bool       `json:"-"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	Decisions []Decision `json:"decisions,omitempty"`
	// Inputs are the call's input requests (SPEC §12), where the reader
	// filled them in.
	Inputs []Input `json:"inputs,omitempty"`
}

// Decision values as stored and as shown in confirmation_resolved.
const (
	DecisionApproved  = "approved"
	DecisionDenied    = "denied"
	DecisionExpired   = "expired"
	DecisionCancelled = "cancelled"
)

// Decision is an immutable record of how a parked call was resolved.
type Decision struct {
	ID         string `json:"id"`
	ToolCallID string `json:"tool_call_id"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
	DecidedBy  string `json:"decided_by"`
	// Role is the role of the API key that decided ("" for the server's
	// own expiries); Via the door the decision came through (Via*).
	Role string `json:"role,omitempty"`
	Via  string `json:"via,omitempty"`
	// ArgumentsSHA256 is the digest of the arguments the decision applies to.
	ArgumentsSHA256 string `json:"arguments_sha256"`
	// An approval with edited arguments records them and their digest.
	EditedArguments       json.RawMessage `json:"edited_arguments,omitempty"`
	EditedArgumentsSHA256 string          `json:"edited_arguments_sha256,omitempty"`
	CreatedAt             time.Time       `json:"decided_at"`
	// The answer to an approval of a call whose quorum is above one (SPEC
	// §11.1; not stored): the call's status (requires_confirmation until
	// the quorum is reached; such an approval has no ID), the approvals so
	// far and the quorum.
	Status    CallStatus `json:"status,omitempty"`
	Approvals []Approval `json:"approvals,omitempty"`
	Quorum    int        `json:"quorum,omitempty"`
}

// Event is one entry of a conversation's durable log, the SSE stream, and
// of the one event feed of every conversation (Feed).
type Event struct {
	ConversationID string `json:"conversation_id"`
	// Seq is the conversation's monotonically increasing sequence number,
	// the SSE id.
	Seq int64 `json:"seq"`
	// Position is the event's place in the feed of all events of every
	// conversation: assigned by the store when the event commits, unique,
	// strictly increasing in commit order (not necessarily gapless). It is
	// not part of the SSE wire format.
	Position int64           `json:"position"`
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data"`
}

// EventDraft is an event before the store assigns its sequence number and
// position.
type EventDraft struct {
	ConversationID string
	Type           string
	Data           json.RawMessage
	// Audit, when set, is an entry of the audit log about a fact no stored
	// call records (a subagent's refusal): the store writes it in the
	// transaction that appends the event, with the event's conversation
	// and that conversation's tenant and project.
	Audit *AuditEntry
}

// Event types (SPEC §6). The data of each is a Go type in events.go.
const (
	EventRunStarted           = "run_started"
	EventTextDelta            = "text_delta"
	EventMessage              = "message"
	EventToolCallStarted      = "tool_call_started"
	EventConfirmationRequired = "confirmation_required"
	EventConfirmationResolved = "confirmation_resolved"
	EventConfirmationProgress = "confirmation_progress"
	EventConfirmationReminder = "confirmation_reminder"
	EventConfirmationExtended = "confirmation_extended"
	EventToolCallRefused      = "tool_call_refused"
	EventToolCallResult       = "tool_call_result"
	EventRunWaiting           = "run_waiting"
	EventRunFinished          = "run_finished"
	EventError                = "error"
	EventSubagentEvent        = "subagent_event"
	EventGrantCreated         = "grant_created"
	EventGrantRevoked         = "grant_revoked"
	EventInputRequired        = "input_required"
	EventInputResolved        = "input_resolved"
)

// Clock is injected wherever time matters, so deadline tests never sleep.
type Clock interface {
	Now() time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }
