package api

import (
	"errors"
	"net/http"

	"github.com/agentd-dev/agentd"
	"github.com/labstack/echo/v4"
)

// statusOf is the one place where error codes become HTTP statuses.
var statusOf = map[string]int{
	agentd.EINVALID:                http.StatusBadRequest,
	agentd.EUNAUTHORIZED:           http.StatusUnauthorized,
	agentd.EFORBIDDEN:              http.StatusForbidden,
	agentd.EAPPROVERNOTALLOWED:     http.StatusForbidden,
	agentd.EREQUESTERMAYNOTAPPROVE: http.StatusForbidden,
	agentd.EEXTENSIONEXCEEDSMAX:    http.StatusUnprocessableEntity,
	agentd.EGRANTTTLEXCEEDSMAX:     http.StatusUnprocessableEntity,
	agentd.EREMEMBERNOTALLOWED:     http.StatusForbidden,
	agentd.EANSWERERNOTALLOWED:     http.StatusForbidden,
	agentd.EINVALIDINPUT:           http.StatusUnprocessableEntity,
	agentd.EWRITENOTALLOWED:        http.StatusForbidden,
	agentd.ENOTFOUND:               http.StatusNotFound,
	agentd.ECONFLICT:               http.StatusConflict,
	agentd.EEXPIRED:                http.StatusConflict,
	agentd.ESTALE:                  http.StatusConflict,
	agentd.ERUNACTIVE:              http.StatusConflict,
	agentd.ENOTAPPLIED:             http.StatusConflict,
	agentd.ETOOLARGE:               http.StatusRequestEntityTooLarge,
	agentd.ETOOMANYSTREAMS:         http.StatusTooManyRequests,
	agentd.EMISDIRECTED:            http.StatusMisdirectedRequest,
	agentd.EUNSUPPORTED:            http.StatusUnsupportedMediaType,
	agentd.EINTERNAL:               http.StatusInternalServerError,
	agentd.EUNAVAILABLE:            http.StatusServiceUnavailable,
	agentd.EGONE:                   http.StatusGone,

	// The router's answer to a known path with another method (with Allow).
	agentd.EMETHODNOTALLOWED: http.StatusMethodNotAllowed,
}

// errorBody is SPEC §5's error shape; fields names every bad field of an
// answer's content (invalid_input, SPEC §12.3).
type errorBody struct {
	Error struct {
		Code    string              `json:"code"`
		Message string              `json:"message"`
		Fields  []agentd.FieldError `json:"fields,omitempty"`
	} `json:"error"`
}

// handleError writes {"error": {"code", "message"}} with the status of the
// code. Clients get the safe message; the log gets the detail.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code, msg := agentd.ErrorCode(err), agentd.ErrorMessage(err)
	var he *echo.HTTPError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		code, msg = agentd.ETOOLARGE, "request body is too large"
	case errors.As(err, &he):
		switch he.Code {
		case http.StatusNotFound:
			code, msg = agentd.ENOTFOUND, "no such route"
		case http.StatusMethodNotAllowed:
			code, msg = agentd.EMETHODNOTALLOWED, "method not allowed on this route"
		case http.StatusRequestEntityTooLarge:
			code, msg = agentd.ETOOLARGE, "request body is too large"
		default:
			code, msg = agentd.EINVALID, http.StatusText(he.Code)
		}
	}
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
		if he != nil {
			status = he.Code
		}
	}
	if status >= 500 {
		s.log.Error().Err(err).Str("path", loggedPath(c.Request())).Msg("internal error")
	}
	var body errorBody
	body.Error.Code, body.Error.Message = code, msg
	if ae := (*agentd.Error)(nil); errors.As(err, &ae) && code == agentd.EINVALIDINPUT {
		body.Error.Fields = ae.Fields
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSON(status, body)
}
