package connections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// maxRedirects is how many same-origin redirects a request follows.
const maxRedirects = 5

// userAgent is sent unless connection.json's headers set one.
const userAgent = "agentd"

// Methods the client sends.
var clientMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// Response is a downstream response with the connection's secrets
// redacted from it (see Connection.redact), its body bounded by the
// connection's max_response_bytes.
type Response struct {
	Status      int
	StatusText  string // "Unprocessable Entity"
	ContentType string
	// Body is the redacted body, at most max_response_bytes long.
	Body []byte
	// Truncated is true when Body is not the whole redacted body: the
	// body was longer than max_response_bytes (or became longer through
	// redaction) and Body holds its beginning.
	Truncated bool
}

// RedirectError is the failure of a request whose response redirected
// outside the connection's origin or base path, or too often. The
// redirect was not followed: nothing was sent to its target.
type RedirectError struct {
	msg string
}

func (e *RedirectError) Error() string { return e.msg }

// startSpan starts the client span of a request under ctx's span, with the
// tracer provider of that span: without a recording span in ctx (traces
// off) it starts nothing. The span holds the method, the connection and
// its host, never a path, header or body.
func (c *Connection) startSpan(ctx context.Context, tg *confirm.Target) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if tg == nil || !parent.IsRecording() {
		return ctx, nil
	}
	method := strings.ToUpper(tg.Method)
	base, _ := c.origin()
	return parent.TracerProvider().Tracer(tracerName).Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", method),
			attribute.String("server.address", base.Hostname()),
			attribute.String("agentd.connection.name", c.Name),
		))
}

func endSpan(span trace.Span, resp *Response, err error) {
	if span == nil {
		return
	}
	switch {
	case err != nil:
		span.SetStatus(codes.Error, err.Error()) // redacted, like every error of Do
	case resp.Status >= 400:
		span.SetStatus(codes.Error, "")
	}
	if resp != nil {
		span.SetAttributes(attribute.Int("http.response.status_code", resp.Status))
	}
	span.End()
}

// tracerName names the connections' spans.
const tracerName = "github.com/agentd-dev/agentd/connections"

func (c *Connection) newClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // no HTTP_PROXY surprises: requests go where base_url says
	return &http.Client{Transport: tr, Timeout: c.timeout, CheckRedirect: c.checkRedirect}
}

// Do sends the request tg describes and reads the response. It enforces
// the safety rules of SPEC §3 itself, whatever the caller checked before:
//
//   - tg.Path is re-cleaned with confirm.CleanEndpoint; the URL is the base
//     URL's origin, its path prefix and the path, and is verified to stay
//     on that origin and under that prefix (on a segment boundary);
//   - headers are the connection's static headers, then tg.Header (each
//     re-checked with confirm.CheckHeader and confirm.CheckHeaderValue; one
//     that a static header or auth sets is refused), then the credentials, which nothing overrides;
//     Idempotency-Key is idempotencyKey when it is not "";
//     Content-Type is application/json when there is a body;
//   - redirects are followed only within the origin and prefix, at most 5;
//     any other redirect fails the request with a *RedirectError and is
//     never requested, so credentials never leave the origin;
//   - the connection's timeout bounds the whole exchange, independently of
//     ctx; the body is read up to max_response_bytes plus the length of
//     the longest secret, the secrets are redacted from it and from the
//     status text, and only then is it cut to max_response_bytes.
//
// Any HTTP status is a Response, not an error. Neither a Response nor an
// error carries a secret, even when the server echoes one.
//
// When ctx carries a span (a traced tool call), the request is a child
// span of it and carries that span as its W3C traceparent header.
func (c *Connection) Do(ctx context.Context, tg *confirm.Target, idempotencyKey string) (*Response, error) {
	ctx, span := c.startSpan(ctx, tg)
	resp, err := c.do(ctx, tg, idempotencyKey)
	endSpan(span, resp, err)
	return resp, err
}

func (c *Connection) do(ctx context.Context, tg *confirm.Target, idempotencyKey string) (*Response, error) {
	if tg == nil {
		return nil, errors.New("no request")
	}
	if tg.Connection != "" && tg.Connection != c.Name {
		return nil, fmt.Errorf("the request is for connection %q, not %q", tg.Connection, c.Name)
	}
	method := strings.ToUpper(tg.Method)
	if !slices.Contains(clientMethods, method) {
		return nil, fmt.Errorf("method %q is not supported (use one of %s)", tg.Method, strings.Join(clientMethods, ", "))
	}
	u, err := c.requestURL(tg.Path)
	if err != nil {
		return nil, err
	}
	if len(tg.Query) > 0 {
		u.RawQuery = tg.Query.Encode()
	}
	var body io.Reader
	if tg.Body != nil {
		body = bytes.NewReader(tg.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("cannot build the request: %v", err)
	}
	if err := c.setHeaders(req, tg, idempotencyKey); err != nil {
		return nil, err
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		req.Header.Set("Traceparent", tracing.Format(sc))
	}
	resp, err := c.client.Do(req)
	if err != nil {
		// A *url.Error quotes the URL of the last request, which after a
		// same-origin redirect is the server's choice and may carry a secret.
		err = describeTransportError(err)
		var re *RedirectError
		if errors.As(err, &re) {
			return nil, re // already redacted
		}
		return nil, errors.New(c.redactString(err.Error()))
	}
	defer resp.Body.Close()
	out := &Response{Status: resp.StatusCode, StatusText: c.redactString(statusText(resp)),
		ContentType: c.redactString(resp.Header.Get("Content-Type"))}
	// Read far enough past the bound to see whole any secret that starts
	// before it: secrets are redacted before the body is cut.
	window := c.maxResponse + int64(c.longestSecret())
	data, err := io.ReadAll(io.LimitReader(resp.Body, window+1))
	if err != nil {
		return nil, fmt.Errorf("reading the response of %s %s: %v", method, u.Path, describeTransportError(err))
	}
	more := int64(len(data)) > window
	if more {
		data = data[:window]
	}
	out.Body, out.Truncated = c.redact(data, c.maxResponse, more)
	return out, nil
}

// requestURL joins the base URL and a request path and verifies the result
// stays on the base URL's origin and under its path prefix.
func (c *Connection) requestURL(path string) (*url.URL, error) {
	clean, err := confirm.CleanEndpoint(path)
	if err != nil {
		return nil, err
	}
	base, prefix := c.origin()
	u, err := url.Parse(base.Scheme + "://" + base.Host + prefix + clean)
	if err != nil {
		return nil, fmt.Errorf("endpoint %q does not make a valid URL", path)
	}
	if !c.inside(u, base, prefix) {
		return nil, fmt.Errorf("endpoint %q leaves the connection's base URL", path)
	}
	return u, nil
}

// inside reports whether u is on base's origin and under the path prefix,
// on a segment boundary, with a clean path.
func (c *Connection) inside(u, base *url.URL, prefix string) bool {
	if u.Scheme != base.Scheme || !strings.EqualFold(u.Host, base.Host) || u.User != nil || u.Opaque != "" {
		return false
	}
	p := u.EscapedPath()
	if p == prefix || p == prefix+"/" {
		return true
	}
	if !strings.HasPrefix(p, prefix+"/") {
		return false
	}
	_, err := confirm.CleanEndpoint(strings.TrimPrefix(p, prefix))
	return err == nil
}

// checkRedirect follows a redirect only within the origin and the path
// prefix, at most maxRedirects times. Its errors quote the redirect's
// target with the secrets redacted.
func (c *Connection) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return &RedirectError{c.redactString(fmt.Sprintf("too many redirects: stopped after %d redirects", maxRedirects))}
	}
	base, prefix := c.origin()
	u := req.URL
	if u.Scheme != base.Scheme || !strings.EqualFold(u.Host, base.Host) {
		return &RedirectError{c.redactString(fmt.Sprintf("the redirect to another origin (%s://%s) was refused: connection %s only talks to %s://%s",
			u.Scheme, u.Host, c.Name, base.Scheme, base.Host))}
	}
	if !c.inside(u, base, prefix) {
		return &RedirectError{c.redactString(fmt.Sprintf("the redirect to %s was refused: it leaves the base path %q of connection %s",
			u.EscapedPath(), prefix, c.Name))}
	}
	return nil
}

// setHeaders sets the request's headers in the order of Do's contract.
func (c *Connection) setHeaders(req *http.Request, tg *confirm.Target, idempotencyKey string) error {
	h := req.Header
	for k, vs := range c.headers {
		h[k] = slices.Clone(vs)
	}
	for k, v := range tg.Header {
		if err := c.checkModelHeader(k); err != nil {
			return err
		}
		if err := confirm.CheckHeaderValue(k, v); err != nil {
			return err
		}
		h.Set(k, v)
	}
	if c.auth != nil {
		switch c.auth.kind {
		case "bearer":
			h.Set("Authorization", "Bearer "+c.auth.value)
		case "header":
			h.Set(c.auth.header, c.auth.value)
		case "basic":
			req.SetBasicAuth(c.auth.username, c.auth.password)
		}
	}
	if idempotencyKey != "" {
		if err := confirm.CheckHeaderValue("Idempotency-Key", idempotencyKey); err != nil {
			return err
		}
		h.Set("Idempotency-Key", idempotencyKey)
	}
	if tg.Body != nil {
		h.Set("Content-Type", "application/json")
	}
	if h.Get("User-Agent") == "" {
		h.Set("User-Agent", userAgent)
	}
	return nil
}

// checkModelHeader refuses a header name the model may not set: what
// confirm.CheckHeader refuses (the header rule), the connection's static
// headers and its auth header. It is pure.
func (c *Connection) checkModelHeader(name string) error {
	if err := confirm.CheckHeader(name); err != nil {
		return err
	}
	if _, static := c.headers[http.CanonicalHeaderKey(name)]; static ||
		(c.auth != nil && c.auth.kind == "header" && strings.EqualFold(name, c.auth.header)) {
		return fmt.Errorf("header %q is set by the connection and cannot be set by the model", name)
	}
	return nil
}

func statusText(resp *http.Response) string {
	if t := http.StatusText(resp.StatusCode); t != "" {
		return t
	}
	_, t, _ := strings.Cut(resp.Status, " ")
	return t
}

// describeTransportError keeps a refused redirect's own words and
// otherwise returns err; Do redacts the text.
func describeTransportError(err error) error {
	var re *RedirectError
	if errors.As(err, &re) {
		return re
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() {
		return fmt.Errorf("%s %s: timed out", strings.ToUpper(ue.Op), ue.URL)
	}
	return err
}
