package agentd

import (
	"slices"
	"time"
)

// Via says through which door a decision came in: its source in the audit
// log and in the decisions metric.
const (
	ViaSingle   = "single"   // POST /v1/tool-calls/{id}/approval
	ViaBulk     = "bulk"     // POST /v1/approvals
	ViaProtocol = "protocol" // a chat protocol's resume (AG-UI, AI SDK)
	ViaDeadline = "deadline" // the approval deadline passed (an expiry)
	ViaCancel   = "cancel"   // the run was cancelled
	ViaLink     = "link"     // POST /d/{token}, a decision link (SPEC §11.4)
)

// Actor is who did something the audit log records: the API key's id and
// role ("system" with no role for what the server does by itself).
type Actor struct {
	KeyID string
	Role  string
}

// Audit entry kinds (GET /v1/audit "kind").
const (
	// AuditDecision: a person approved or denied a parked call.
	AuditDecision = "decision"
	// AuditExpiry: a parked call's deadline passed with no decision.
	AuditExpiry = "expiry"
	// AuditCancellation: a parked call ended because its run was cancelled.
	AuditCancellation = "cancellation"
	// AuditRefusal: a call was refused (tool_call_refused): never ran.
	AuditRefusal = "refusal"
	// AuditEscalation: a call was parked with escalated: true.
	AuditEscalation = "escalation"
	// AuditApproval: one approval of a call whose quorum it did not yet
	// reach (SPEC §11.1); the approval that reaches it is a decision.
	AuditApproval = "approval"
	// AuditExtension: a parked call's deadline was moved later (SPEC
	// §11.3, POST /v1/tool-calls/{id}/extend); Reason is the extension's,
	// Outcome its duration ("30m").
	AuditExtension = "extension"
	// AuditGrantCreated, AuditGrantRevoked, AuditGrantUse: a remembered
	// grant was made (with the approval), revoked, or let a call run
	// without a card (SPEC §11.2); the reason names the grant.
	AuditGrantCreated = "grant_created"
	AuditGrantRevoked = "grant_revoked"
	AuditGrantUse     = "grant_use"
	// AuditConnectionRequest: a request on the durable path,
	// POST /v1/connections/{name}/request.
	AuditConnectionRequest = "connection_request"
	// AuditToolEval: a direct eval, POST /v1/tools/{name}/eval.
	AuditToolEval = "tool_eval"
	// AuditToolRun: a run on the invoke trigger, POST /v1/tools/{name}/run.
	AuditToolRun = "tool_run"
	// AuditScheduleRun: a scheduled tool's run at one tick.
	AuditScheduleRun = "schedule_run"
	// AuditScheduleMissed: ticks of a schedule that passed with no run
	// (every replica was down, or the previous run was still going).
	AuditScheduleMissed = "schedule_missed"
)

// AuditKinds are the valid kinds, in documentation order.
var AuditKinds = []string{AuditDecision, AuditApproval, AuditExtension, AuditExpiry, AuditCancellation, AuditRefusal, AuditEscalation,
	AuditToolEval, AuditToolRun, AuditScheduleRun, AuditScheduleMissed, AuditGrantCreated, AuditGrantUse, AuditGrantRevoked, AuditConnectionRequest}

// AuditEntry is one immutable record of the audit log (docs/audit.md). The
// store writes the entries of decisions, expiries, cancellations, refusals
// and escalations itself, in the transaction that records the fact (see
// Store); durable-path requests are appended with AuditLog.AppendAudit.
type AuditEntry struct {
	// ID is assigned by the store: unique, increasing in commit order; the
	// cursor of GET /v1/audit.
	ID             int64  `json:"id"`
	Kind           string `json:"kind"`
	TenantID       string `json:"tenant_id"`
	ProjectID      string `json:"project_id"`
	ConversationID string `json:"conversation_id,omitempty"`
	RunID          string `json:"run_id,omitempty"`
	ToolCallID     string `json:"tool_call_id,omitempty"`
	ToolName       string `json:"tool_name,omitempty"`
	// KeyID and Role: who (an API key's id and role; "system" for the
	// server's own expiries and for refusals of model-selected calls).
	KeyID string `json:"key_id"`
	Role  string `json:"role,omitempty"`
	// Via: the door a decision came through (Via* values).
	Via string `json:"via,omitempty"`
	// Decision is the decision value (Decision*) of decisions, expiries
	// and cancellations.
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Tier     Tier   `json:"tier,omitempty"`
	// Escalated is set on escalations and on refusals of escalated calls.
	Escalated bool `json:"escalated,omitempty"`
	// ArgumentsSHA256 is the digest the entry is about (for a decision:
	// the arguments it was asked about); EditedArgumentsSHA256 the digest
	// of an approval's edited arguments.
	ArgumentsSHA256       string `json:"arguments_sha256,omitempty"`
	EditedArgumentsSHA256 string `json:"edited_arguments_sha256,omitempty"`
	// Durable-path requests: connection, method, endpoint and outcome
	// ("preview", "performed", or the error code that refused it).
	Connection string `json:"connection,omitempty"`
	Method     string `json:"method,omitempty"`
	Endpoint   string `json:"endpoint,omitempty"`
	Outcome    string `json:"outcome,omitempty"`
	// Subagent and TaskToolCallID mark an entry about a subagent's call
	// (which is not a stored call: ToolCallID is its id in the
	// subagent_event): the subagent's name and the parent's task call
	// that ran it.
	Subagent       string    `json:"subagent,omitempty"`
	TaskToolCallID string    `json:"task_tool_call_id,omitempty"`
	CreatedAt      time.Time `json:"at"`
}

// AuditFilter selects entries for AuditLog.Audit. TenantID and ProjectID are
// required; every other field narrows when set.
type AuditFilter struct {
	TenantID, ProjectID string
	Kind                string
	ToolCallID          string
	ConversationID      string
	// Since and Until bound CreatedAt: Since <= at < Until.
	Since, Until time.Time
	// After is the cursor: only entries with a greater ID.
	After int64
	// Limit bounds the result (1..1000; other values mean 1000).
	Limit int
}

// MaxAuditPage is the most entries one AuditLog.Audit call returns.
const MaxAuditPage = 1000

// Check is what every store's Audit checks first: it returns f's page
// size (Limit, or MaxAuditPage outside 1..MaxAuditPage), or EINVALID when
// TenantID or ProjectID is empty or Kind is set and not one of AuditKinds.
func (f AuditFilter) Check() (limit int, err error) {
	if f.TenantID == "" || f.ProjectID == "" {
		return 0, Errorf(EINVALID, "the audit log is read per tenant and project")
	} else if f.Kind != "" && !slices.Contains(AuditKinds, f.Kind) {
		return 0, Errorf(EINVALID, "unknown audit kind %q", f.Kind)
	}
	if f.Limit <= 0 || f.Limit > MaxAuditPage {
		return MaxAuditPage, nil
	}
	return f.Limit, nil
}

// MaxBatchDecisions bounds the items of one POST /v1/approvals.
const MaxBatchDecisions = 100

// BatchDecisionItem is one item of a bulk decision (POST /v1/approvals).
// Approve true with Arguments is an approval with edited arguments.
type BatchDecisionItem struct {
	ToolCallID      string
	Approve         bool
	Reason          string
	Arguments       []byte
	ArgumentsSHA256 string
	// CardRevision is DecisionRequest.CardRevision.
	CardRevision int
	// Remember is DecisionRequest.Remember: the grant the approval makes.
	Remember *Remember
}

// Outcomes of one item of a bulk decision.
const (
	// BatchApplied: the decision holds (applied now, or an idempotent
	// repeat of the stored one); Decision is the stored record.
	BatchApplied = "applied"
	// BatchFailed: the item's own error (as the single approval would
	// answer it) is in Error.
	BatchFailed = "failed"
	// BatchNotApplied: an atomic batch in which another item failed; this
	// item was valid but nothing of the batch was applied.
	BatchNotApplied = "not_applied"
)

// BatchDecisionResult is the outcome of one item, in request order.
type BatchDecisionResult struct {
	ToolCallID string     `json:"tool_call_id"`
	Status     string     `json:"status"`
	Decision   *Decision  `json:"decision,omitempty"`
	Error      *ItemError `json:"error,omitempty"`
}

// ItemError is the {code, message} of a failed item.
type ItemError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// NewItemError is err as an item's {code, message}: the client-safe
// message, as the single route would send it.
func NewItemError(err error) *ItemError {
	return &ItemError{Code: ErrorCode(err), Message: ErrorMessage(err)}
}
