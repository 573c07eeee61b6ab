package agentd

import (
	"errors"
	"fmt"
)

// Error codes. The API maps each to one HTTP status in one place (api/errors.go).
const (
	EINVALID      = "invalid"      // 400: malformed or semantically wrong input
	EUNAUTHORIZED = "unauthorized" // 401: no or bad credentials
	EFORBIDDEN    = "forbidden"    // 403: authenticated but the role may not do this
	// EWRITENOTALLOWED is 403: a command tool whose confirm is false made a
	// write through its context endpoint (SPEC §4.1).
	EWRITENOTALLOWED = "write_not_allowed"
	ENOTFOUND        = "not_found"  // 404: absent, or owned by another tenant
	ECONFLICT        = "conflict"   // 409: state does not allow the operation
	EEXPIRED         = "expired"    // 409: the approval deadline has passed
	ESTALE           = "stale"      // 409: arguments_sha256 differs from the pending digest
	ERUNACTIVE       = "run_active" // 409: a run is already active on the conversation
	ETOOLARGE        = "too_large"  // 413: body over the limit
	// ETOOMANYSTREAMS is 429: the API key holds as many open streams as
	// its limit allows (agentd.json limits.max_streams_per_key).
	ETOOMANYSTREAMS = "too_many_streams"
	EMISDIRECTED    = "misdirected" // 421: dev mode answers only loopback Host names
	EUNSUPPORTED    = "unsupported" // 415
	ENOTAPPLIED     = "not_applied" // 409: an atomic batch's item, not applied because another failed
	EINTERNAL       = "internal"    // 500
	// EAPPROVERNOTALLOWED and EREQUESTERMAYNOTAPPROVE are 403: a decision
	// the call's approval rule refuses (SPEC §11.1).
	EAPPROVERNOTALLOWED     = "approver_not_allowed"
	EREQUESTERMAYNOTAPPROVE = "requester_may_not_approve"
	// EEXTENSIONEXCEEDSMAX is 422: an extension past the call's
	// max_extension (SPEC §11.3).
	EEXTENSIONEXCEEDSMAX = "extension_exceeds_max"
	EUNAVAILABLE         = "unavailable" // 503
	// EGONE: a decision link already used, or past its expiry (SPEC §11.4).
	EGONE = "gone" // 410
	// EGRANTTTLEXCEEDSMAX is 422: a remember whose ttl is above the
	// call's grant_max_ttl; EREMEMBERNOTALLOWED is 403: a remember on a
	// call whose card does not offer it (SPEC §11.2).
	EGRANTTTLEXCEEDSMAX = "grant_ttl_exceeds_max"
	EREMEMBERNOTALLOWED = "remember_not_allowed"

	// EINVALIDINPUT is 422: an answer's content does not fit its input's
	// schema (SPEC §12.3; Error.Fields names every bad field);
	// EANSWERERNOTALLOWED is 403: the input's rule does not cover the key.
	EINVALIDINPUT       = "invalid_input"
	EANSWERERNOTALLOWED = "answerer_not_allowed"

	// EMETHODNOTALLOWED is 405: a known path asked with a method it does
	// not serve; the answer's Allow header lists the ones it does.
	EMETHODNOTALLOWED = "method_not_allowed"
)

// Error is the one error type that carries a code and a message that is safe
// to show to a client. Detail is for logs only.
type Error struct {
	Code    string
	Message string
	Detail  error
	// Fields, with EINVALIDINPUT, are the bad fields of an answer's
	// content, every one (the error's "fields", SPEC §12.3).
	Fields []FieldError
}

func (e *Error) Error() string {
	if e.Detail != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Detail)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Detail }

// Errorf returns an *Error with a formatted, client-safe message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// EINTERNAL for any other non-nil error and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return "" // before e, which escapes: no allocation for no error
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of err.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
