package agentd

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// InputStatus is the status of an input request (SPEC §12).
type InputStatus string

// Input statuses (SPEC §12): pending until answered (any action), expired
// at its deadline, cancelled by agentd (InputReason*), or lost (an older
// MCP server's request that cannot outlive its connection).
const (
	InputPending   InputStatus = "pending"
	InputAnswered  InputStatus = "answered"
	InputExpired   InputStatus = "expired"
	InputCancelled InputStatus = "cancelled"
	InputLost      InputStatus = "lost"
)

// Answer actions (SPEC §12, MCP's three): accept (with content in form
// mode), decline (an explicit no), cancel (dismissed without a choice).
const (
	InputAccept  = "accept"
	InputDecline = "decline"
	InputCancel  = "cancel"
)

// Input modes (SPEC §12): a form validated against a restricted schema,
// or a URL the person visits.
const (
	InputModeForm = "form"
	InputModeURL  = "url"
)

// Input sources (SPEC §12.1).
const (
	InputSourceAskUser = "ask_user"
	InputSourceTool    = "tool"
	InputSourceMCP     = "mcp"
)

// Reasons an input is cancelled by agentd (SPEC §12).
const (
	InputReasonSuperseded      = "superseded"
	InputReasonRunCancelled    = "run_cancelled"
	InputReasonServerCancelled = "server_cancelled"
)

// Input is an input request (SPEC §12): a question to a person that one
// tool call waits on (the call is requires_input, its run waiting). It is
// created with its call's park and answered exactly once.
type Input struct {
	ID             string      `json:"id"`
	TenantID       string      `json:"tenant_id"`
	ProjectID      string      `json:"project_id"`
	ConversationID string      `json:"conversation_id"`
	RunID          string      `json:"run_id"`
	ToolCallID     string      `json:"tool_call_id"`
	ToolName       string      `json:"tool_name"`
	ServerID       string      `json:"server_id"`
	Status         InputStatus `json:"status"`
	// Source is InputSource*; Key the request's key within its round
	// (the ask_user tool's one request has key "ask_user"); Round 1, 2, …
	Source string `json:"source"`
	Key    string `json:"key"`
	Round  int    `json:"round"`
	// Mode is InputModeForm or InputModeURL; Schema the form's restricted
	// JSON Schema (SPEC §12.2).
	Mode    string          `json:"mode"`
	Message string          `json:"message"`
	Schema  json.RawMessage `json:"schema,omitempty"`
	// Answerers are who may answer (SPEC §12.3, §11.1's words).
	Answerers []string  `json:"answerers"`
	ExpiresAt time.Time `json:"expires_at"`
	CreatedAt time.Time `json:"created_at"`
	// Once resolved: the action and content of an answer, who answered
	// (key id), when, through which door, and a cancellation's reason.
	Action     string          `json:"action,omitempty"`
	Content    json.RawMessage `json:"content,omitempty"`
	AnsweredBy string          `json:"answered_by,omitempty"`
	AnsweredAt *time.Time      `json:"answered_at,omitempty"`
	Via        string          `json:"via,omitempty"`
	Reason     string          `json:"reason,omitempty"`
}

// InputAnswer is the body of POST /v1/inputs/{id}/answer (SPEC §12.3).
type InputAnswer struct {
	Action  string          `json:"action"`
	Content json.RawMessage `json:"content,omitempty"`
	// Via is the door the answer came through (ViaSingle when empty);
	// not part of the body.
	Via string `json:"-"`
}

// InputQuery is a page of GET /v1/inputs (SPEC §12.2): the cursor (an
// input id), the page size and the filters.
type InputQuery struct {
	Cursor         string
	Limit          int
	Status         InputStatus
	ConversationID string
	ToolName       string
	// Answerable keeps only the inputs the principal may answer now.
	Answerable bool
}

// InputFilter selects inputs for InputStore.Inputs.
type InputFilter struct {
	TenantID, ProjectID string
	// CreatedBy, when set, keeps only inputs of conversations created by
	// that key (what a client key may list).
	CreatedBy string
	// Status, ConversationID and ToolName, when set, keep only the inputs
	// with that status, conversation or tool.
	Status         InputStatus
	ConversationID string
	ToolName       string
	// ToolCallID, when set, keeps only the inputs of that call.
	ToolCallID string
	// After is the cursor: only inputs with a greater ID.
	After string
	// Limit bounds the result (1..1000; other values mean 1000).
	Limit int
}

// InputResolution is one input's answer or cancellation as the store
// applies it (InputStore.ResolveInput): the input moves from pending to
// Status with the answer's fields, and its call from requires_input to
// CallStatus with Result — one conditional update of each.
type InputResolution struct {
	InputID    string
	Status     InputStatus
	Action     string
	Content    json.RawMessage
	AnsweredBy string
	Via        string
	Reason     string
	At         time.Time
	// CallStatus and Result are what the input's call becomes.
	CallStatus CallStatus
	Result     json.RawMessage
}

// FieldError is one bad field of an answer's content (SPEC §12.3: the
// error's "fields").
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// DefaultInputTimeout is how long an input waits for its answer when the
// input rule sets no timeout (SPEC §12.3).
const DefaultInputTimeout = 15 * time.Minute

// InputRule is who answers an input request and for how long (SPEC §12.3:
// agent.json "inputs"). AskUser gives the agent's model the ask_user tool.
type InputRule struct {
	AskUser bool `json:"ask_user"`
	// Timeout sets an input's expires_at (0: DefaultInputTimeout).
	Timeout time.Duration `json:"-"`
	// Answerers are §11.1's words: owner, operator, admin, group:<name>
	// (nil: owner).
	Answerers []string `json:"answerers,omitempty"`
}

// AnswerersOf is r's answerers, ["owner"] when it names none.
func (r *InputRule) AnswerersOf() []string {
	if r == nil || len(r.Answerers) == 0 {
		return []string{ApproverOwner}
	}
	return r.Answerers
}

// TimeoutOf is r's timeout, DefaultInputTimeout when it sets none.
func (r *InputRule) TimeoutOf() time.Duration {
	if r == nil || r.Timeout <= 0 {
		return DefaultInputTimeout
	}
	return r.Timeout
}

// MayAnswer is the one check of SPEC §12.3 of who may answer an input
// whose answerers are answerers, in conversation conv (which p reaches):
// nil, or EANSWERERNOTALLOWED naming the rule. A delegate key answers
// only as the owner of its own conversation.
func MayAnswer(answerers []string, p Principal, conv *Conversation) error {
	rule := ApprovalRule{Approvers: answerers}
	if p.Role == RoleDelegate {
		rule.Approvers = nil
		if slices.Contains(answerers, ApproverOwner) {
			rule.Approvers = []string{ApproverOwner}
		}
		p.Role = RoleClient // Covers refuses delegates; an owner's check is by key
	}
	if !rule.Covers(p, conv) {
		return Errorf(EANSWERERNOTALLOWED, "key %q may not answer this input: its input rule allows answerers %s",
			p.KeyID, strings.Join(answerers, ", "))
	}
	return nil
}
