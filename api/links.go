package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/labstack/echo/v4"
)

// linksRequest is the body of POST /v1/tool-calls/{id}/links.
type linksRequest struct {
	TTL string `json:"ttl"`
}

// handleMintLinks answers POST /v1/tool-calls/{id}/links: the call's
// approve and deny URLs (SPEC §11.4).
func (s *Server) handleMintLinks(c echo.Context) error {
	if s.cfg.Links == nil {
		return agentd.Errorf(agentd.ENOTFOUND, "decision links are not configured")
	}
	var req linksRequest
	if err := decode(c, &req, true); err != nil {
		return err
	}
	l, err := s.cfg.Links.Mint(c.Request().Context(), principal(c), c.Param("id"), req.TTL)
	if err != nil {
		return err
	}
	base := s.baseURL(c)
	return c.JSON(http.StatusOK, agentd.DecisionLinks{Approve: LinkURL(base, l.Approve), Deny: LinkURL(base, l.Deny), ExpiresAt: l.ExpiresAt})
}

// LinkURL is a decision link's URL: base (the server's public URL) then
// /d/ and the token.
func LinkURL(base, token string) string { return strings.TrimRight(base, "/") + "/d/" + token }

// baseURL is agentd.json public_url when set, else the scheme and Host of
// the request (docs/api.md#decision-links).
func (s *Server) baseURL(c echo.Context) string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	return c.Scheme() + "://" + c.Request().Host
}

// linkPageCSP: no script, no style but the page's own inline one, no
// framing, forms only to this server.
const linkPageCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// linkPage is the data of the link pages' template.
type linkPage struct {
	Title, Message string
	View           *agentd.LinkView
	Arguments      string
	Deadline       string
	Action         string // the form's target; empty: no form
}

var linkTemplate = template.Must(template.New("link").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin"><title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}pre{background:#f4f4f4;padding:.75rem;overflow:auto;white-space:pre-wrap}button{font-size:1rem;padding:.5rem 1.25rem}</style>
</head><body>
<h1>{{.Title}}</h1>
{{with .Message}}<p id="message">{{.}}</p>{{end}}
{{with .View}}<section id="card">
<p>Tool: <strong id="tool">{{.Call.Name}}</strong></p>
{{with .Call.Reason}}<p>Reason: <span id="reason">{{.}}</span></p>{{end}}
<p>Arguments:</p><pre id="arguments">{{$.Arguments}}</pre>
{{with $.Deadline}}<p>Decide before: <time id="deadline">{{.}}</time></p>{{end}}
</section>{{end}}
{{with .Action}}<form method="post" action="{{.}}">
{{if eq $.View.Decision "deny"}}<p><label>Reason (optional)<br><textarea name="reason" maxlength="4096" rows="3" cols="40"></textarea></label></p>{{end}}
<button type="submit" id="decide">{{if eq $.View.Decision "approve"}}Approve{{else}}Deny{{end}}</button>
</form>{{end}}
</body></html>
`))

// writeLinkPage answers a link page: no caching, no framing, no script.
func writeLinkPage(c echo.Context, status int, page linkPage) error {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", linkPageCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: a form POST would send Origin: null
	var buf bytes.Buffer
	if err := linkTemplate.Execute(&buf, page); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// linkErrorPage answers a link's refusal as a short page with the error
// table's status (404 tampered or unknown, 410 spent or expired, 409
// decided otherwise).
func linkErrorPage(c echo.Context, err error) error {
	code := agentd.ErrorCode(err)
	status, ok := statusOf[code]
	if !ok || code == agentd.EINTERNAL {
		return err // the error handler logs and answers it
	}
	title := map[int]string{http.StatusNotFound: "Link not found", http.StatusGone: "Link no longer valid",
		http.StatusConflict: "Already decided"}[status]
	return writeLinkPage(c, status, linkPage{Title: cmp.Or(title, "Cannot decide"), Message: agentd.ErrorMessage(err)})
}

// handleLinkPage answers GET /d/{token}: the card and one button. It
// never decides.
func (s *Server) handleLinkPage(c echo.Context) error {
	if s.cfg.Links == nil {
		return linkErrorPage(c, agentd.Errorf(agentd.ENOTFOUND, "no such decision link"))
	}
	v, err := s.cfg.Links.Open(c.Request().Context(), c.Param("token"))
	if err != nil {
		return linkErrorPage(c, err)
	}
	page := linkPage{Title: "Approve this tool call?", View: v, Action: "/d/" + c.Param("token"), Arguments: argumentsText(v.Call.Arguments)}
	if v.Decision == "deny" {
		page.Title = "Deny this tool call?"
	}
	if at := v.Call.RequiresApprovalAt; at != nil {
		page.Deadline = at.UTC().Format(time.RFC3339)
	}
	return writeLinkPage(c, http.StatusOK, page)
}

// handleLinkUse answers POST /d/{token} (a form; a deny link's optional
// field is reason): the decision, once, as the minting key.
func (s *Server) handleLinkUse(c echo.Context) error {
	if s.cfg.Links == nil {
		return linkErrorPage(c, agentd.Errorf(agentd.ENOTFOUND, "no such decision link"))
	}
	reason := c.FormValue("reason")
	v, _, err := s.cfg.Links.Use(c.Request().Context(), c.Param("token"), reason)
	if err != nil {
		return linkErrorPage(c, err)
	}
	msg := "Approved: the call runs now. You can close this page."
	if v.Decision == "deny" {
		msg = "Denied: the call will not run. You can close this page."
	}
	return writeLinkPage(c, http.StatusOK, linkPage{Title: "Decision recorded", Message: msg})
}

// argumentsText is arguments as indented JSON text (as they are when not
// a JSON value).
func argumentsText(raw json.RawMessage) string {
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}
