// Package confirm is agentd's pure classification of calls (SPEC §2):
// given a model-selected call, the tool it names and the context of the
// conversation, it returns the call's tier, the reason, whether the tier was
// escalated, the effective arguments and their digest. It does no I/O and
// imports no HTTP framework or database driver, so every rule can be
// table-tested.
package confirm

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentd-dev/agentd"
)

// Exposure kinds of custom tools (tool.json exposure.kind).
const (
	ExposureOpen                 = "open"
	ExposureRequiresConfirmation = "requires-confirmation"
	ExposureOperatorGated        = "operator-gated"
)

// MethodTool is the card method of a non-connection tool.
const MethodTool = "TOOL"

// Tool is what the classification needs to know of a tool.
type Tool struct {
	Name     string
	ServerID string
	// Exposure is the tool.json exposure kind; "" means open.
	Exposure string
	// Prompt overrides the card reason of a requires-confirmation tool.
	Prompt string
	// Validate checks arguments against the tool's schema and returns the
	// effective arguments. It must be pure. Nil accepts any JSON object.
	Validate func(json.RawMessage) (json.RawMessage, error)
	// Approval is the tool's approval rule (tool.json or mcp.json
	// "approval", SPEC §11.1); nil: the agent's.
	Approval *agentd.ApprovalRule

	// Kind is KindCustom, KindRequest or KindOperation.
	Kind string
	// Connections are the connections the request tool reaches, by name.
	Connections map[string]*ConnectionPolicy
	// Connection and Operation are set for an OpenAPI operation tool.
	Connection *ConnectionPolicy
	Operation  *Operation
}

// Call is one model-selected call in its context.
type Call struct {
	Name      string
	Arguments json.RawMessage
	// Tool is the named tool if the agent's model may call it; nil when the
	// name is unknown or not in the agent's list (the registry decides
	// which tools the model sees: tools/registry).
	Tool *Tool
	// Delegated is true in a conversation created by an automation or a
	// delegate-role key (delegations.escalateConfirm applies).
	Delegated bool
	// TenantID is the tenant of the conversation or of the durable-path
	// caller: a connection whose TenantIDs do not list it is refused.
	TenantID string
	// Mode is the execution context; the zero value is the agent loop.
	Mode Mode
	// Hook is the combined verdict of the call's preToolUse hooks (nil:
	// no hook matched). Its Arguments, when set, replace Arguments.
	Hook *HookVerdict
}

// Classification is confirm's outcome for one call: its tier and why.
type Classification struct {
	Tier agentd.Tier
	// Reason is the sentence the model (or the card) reads: for a refused
	// call, that the call was not performed and why.
	Reason string
	// Why is, for a refused call, only the cause in a few words (no
	// sentence around it): what a caller quotes when it reports the
	// refusal in its own words. Never derive it from Reason.
	Why       string
	Escalated bool
	// Refused is true for review and never: the call does not run and the
	// model reads Reason.
	Refused bool
	// Invalid is set on a refusal because of the arguments themselves
	// (schema, unknown connection, unsafe endpoint, forbidden header), as
	// opposed to the policy.
	Invalid bool
	// Arguments are the effective arguments and Digest their
	// arguments_sha256. Digest is empty on a refusal for arguments that
	// have none: not valid JSON (Arguments is then their text as a JSON
	// string) or holding a number a double does not hold as written.
	Arguments json.RawMessage
	Digest    string
	ServerID  string
	Method    string
	Endpoint  string
	// AllowedDecisions lists what an approver may answer (confirm tier only).
	AllowedDecisions []string

	// Connection calls only: the connection, the path template, the
	// grouped arguments {path, query, header, body} and the request.
	Connection   string
	PathTemplate string
	Params       json.RawMessage
	Target       *Target
	// Preview is set in ModeDurable for a confirm-tier call that did not
	// declare confirmed_write: the caller gets a preview, nothing runs.
	Preview bool
	// ApprovalTimeout is the endpoint's own deadline; 0 means the agent's.
	ApprovalTimeout time.Duration
	// Approval is the approval rule of the endpoint or the tool (SPEC
	// §11.1); nil: the agent's.
	Approval *agentd.ApprovalRule
}

// Classify classifies one model-selected call of the agent loop: the tool's
// tier (exposure, or connection policy, thresholds and delegation), then
// the hooks' verdict (hook.go).
func Classify(c Call) Classification {
	if c.Hook != nil && c.Hook.Arguments != nil {
		c.Arguments = c.Hook.Arguments
	}
	return applyHook(c, classify(c))
}

// classify is Classify before the hooks' verdict.
func classify(c Call) Classification {
	d := Classification{Method: MethodTool, Endpoint: c.Name}
	args := c.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	if c.Tool == nil {
		d.Tier, d.Refused = agentd.TierNever, true
		d.Why = fmt.Sprintf("tool %q is not available to this agent", c.Name)
		d.Reason = fmt.Sprintf("Tool %q is not available to this agent, so the call was not performed.", c.Name)
		d.Arguments, d.Digest = digestOrEmpty(args)
		return d
	}
	d.ServerID, d.Approval = c.Tool.ServerID, c.Tool.Approval
	eff, err := validate(c.Tool, args)
	if err != nil {
		d.Tier, d.Refused, d.Invalid = agentd.TierNever, true, true
		d.Why = err.Error()
		d.Reason = fmt.Sprintf("The call was not performed: %v", err)
		d.Arguments, d.Digest = digestOrEmpty(args)
		return d
	}
	digest, err := Digest(eff)
	if err != nil { // a number a double does not hold: never run what the digest cannot bind
		d.Tier, d.Refused, d.Invalid = agentd.TierNever, true, true
		d.Why = fmt.Sprintf("invalid arguments for tool %q: %v", c.Name, err)
		d.Reason = fmt.Sprintf("The call was not performed: invalid arguments for tool %q: %v", c.Name, err)
		d.Arguments = eff
		return d
	}
	d.Arguments, d.Digest = eff, digest
	if c.Tool.Kind == KindRequest || c.Tool.Kind == KindOperation {
		if refused, ok := refuseTenant(c, d, eff); ok {
			return refused
		}
		return classifyConnection(c, d, eff)
	}
	d.Tier = ExposureTier(c.Tool.Exposure)
	if d.Tier == agentd.TierConfirm {
		d.Reason = fmt.Sprintf("Tool %q requires user confirmation", c.Name)
		if c.Tool.Prompt != "" {
			d.Reason = c.Tool.Prompt
		}
		d.AllowedDecisions = []string{"approve", "deny"}
	}
	return d
}

// ExposureTier is the tier of a custom tool's exposure kind (SPEC §2.1):
// requires-confirmation → confirm; open, operator-gated (a label, not
// enforced) and "" → auto.
func ExposureTier(exposure string) agentd.Tier {
	if exposure == ExposureRequiresConfirmation {
		return agentd.TierConfirm
	}
	return agentd.TierAuto
}

func validate(t *Tool, args json.RawMessage) (json.RawMessage, error) {
	if t.Validate != nil {
		return t.Validate(args)
	}
	var obj map[string]any
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("invalid arguments for tool %q: must be a JSON object", t.Name)
	}
	return args, nil
}

// digestOrEmpty is args and their digest; args that have none (a number
// a double does not hold) keep an empty digest, and bytes that are not
// JSON become a JSON string.
func digestOrEmpty(args json.RawMessage) (json.RawMessage, string) {
	d, err := Digest(args)
	if err != nil {
		if json.Valid(args) {
			return args, ""
		}
		b, _ := json.Marshal(string(args))
		return b, ""
	}
	return args, d
}

// Digest returns arguments_sha256: agentd.DigestJSON, the hex SHA-256 of
// the RFC 8785 (JCS) canonical form of args. It fails on input that is not
// valid JSON and on a number a double does not hold as written
// (agentd.ErrInexactNumber).
func Digest(args json.RawMessage) (string, error) { return agentd.DigestJSON(args) }
