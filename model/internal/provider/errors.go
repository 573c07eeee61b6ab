package provider

import (
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strings"

	"github.com/agentd-dev/agentd"
)

// maxMessage bounds a provider message taken from a response body.
const maxMessage = 500

// MessageFromBody extracts the provider's message from an error response
// body: error.message, error (a string), message or detail, else the body
// itself as text, cut by Clip; "" for an empty body.
func MessageFromBody(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  any             `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		var nested struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		}
		var s string
		switch {
		case json.Unmarshal(v.Error, &nested) == nil && nested.Message != "":
			return Clip(nested.Message)
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return Clip(s)
		case v.Message != "":
			return Clip(v.Message)
		}
		if d, ok := v.Detail.(string); ok && d != "" {
			return Clip(d)
		}
	}
	return Clip(strings.Join(strings.Fields(string(body)), " "))
}

// Clip trims the space around s and cuts it to at most 500 bytes with
// agentd.TruncateUTF8 (never inside a rune), marking a cut with "…" after
// them.
func Clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxMessage {
		return s
	}
	return agentd.TruncateUTF8(s, maxMessage) + "…"
}

// TransportFailure classifies an error that left no HTTP response or cut a
// stream short: a refused or reset connection, an unexpected EOF. These are
// retryable. The message names what went wrong without request headers.
func TransportFailure(err error) *Failure {
	var ue *url.Error
	switch {
	case errors.As(err, &ue):
		// url.Error's own text repeats the method and the URL (the SDK's
		// redirect checks keep credentials out of it; net/http redacts a
		// password); the inner error says what happened.
		return &Failure{Message: "cannot reach the model server: " + Clip(ue.Err.Error()), Retryable: true, Cause: err}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &Failure{Message: "the stream broke off before the response was complete", Retryable: true, Cause: err}
	}
	return &Failure{Message: "the connection failed: " + Clip(err.Error()), Retryable: true, Cause: err}
}

// Incomplete is the failure of a stream that ended cleanly but before the
// provider said the response was complete (no finish_reason or
// message_stop). It is retryable.
func Incomplete() *Failure {
	return &Failure{Message: "the stream ended before the response was complete", Retryable: true}
}
