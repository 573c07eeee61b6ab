package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/strictjson"
	"github.com/labstack/echo/v4"
)

// decode is the API's one request-body decoder. It reads exactly one JSON
// object into v and answers EINVALID for a body that is not valid UTF-8,
// malformed, of the wrong type, has an unknown field, a key that names a
// field of v only in another case ({"DECISION": …}: keys match exactly, as
// JavaScript reads them, not as encoding/json does), a key twice in one
// object (keys that differ only by case count as the same, at any depth)
// or data after the object; ETOOLARGE past the body limit. An empty body is
// allowed only when optional is true.
func decode(c echo.Context, v any, optional bool) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	return decodeBytes(body, v, optional)
}

// decodeOpen is decode for the bodies of the chat protocols, whose schemas
// are open: fields v does not have are ignored, everything else is checked
// alike (one JSON object, valid UTF-8, no duplicate keys, keys that match
// v's fields exactly, fields of the right type, the body limit). An empty
// body is EINVALID.
func decodeOpen(c echo.Context, v any) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	return decodeJSON(body, v, false, false)
}

// readBody reads the request body: ETOOLARGE past the body limit.
func readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, agentd.Errorf(agentd.ETOOLARGE, "request body is larger than %d bytes", mbe.Limit)
		}
		return nil, agentd.Errorf(agentd.EINVALID, "cannot read request body")
	}
	return body, nil
}

// decodeBytes is decode on a body already read.
func decodeBytes(body []byte, v any, optional bool) error {
	return decodeJSON(body, v, optional, true)
}

// decodeJSON decodes body into v; strict refuses unknown fields. Keys
// match v's fields exactly either way.
func decodeJSON(body []byte, v any, optional, strict bool) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		if optional {
			return nil
		}
		return agentd.Errorf(agentd.EINVALID, "request body must be a JSON object")
	}
	if trimmed[0] != '{' {
		return agentd.Errorf(agentd.EINVALID, "request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return agentd.Errorf(agentd.EINVALID, "unexpected data after the JSON object")
	}
	// Checked after decoding, so a malformed body reports its syntax error.
	if err := strictjson.CheckKeys(body); err != nil {
		return agentd.Errorf(agentd.EINVALID, "ambiguous JSON: %v", err)
	}
	if err := strictjson.ExactKeys(body, v); err != nil {
		return agentd.Errorf(agentd.EINVALID, "%v", err)
	}
	return nil
}

// decodeError turns an encoding/json error into a client-safe EINVALID.
func decodeError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return agentd.Errorf(agentd.EINVALID, "malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return agentd.Errorf(agentd.EINVALID, "malformed JSON: unexpected end of the body")
	case errors.As(err, &te):
		return agentd.Errorf(agentd.EINVALID, "field %q must be %s, not %s", te.Field, te.Type, te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for this one.
		return agentd.Errorf(agentd.EINVALID, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	default:
		return agentd.Errorf(agentd.EINVALID, "malformed JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}
