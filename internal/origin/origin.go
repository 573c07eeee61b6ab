// Package origin is the one definition of a web origin as agentd compares
// them: the Origin header of a request and the entries of agentd.json's
// cors_origins are both normalized by Normalize, then compared as strings;
// Same compares the origins of two URLs (an MCP server's redirects).
package origin

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Normalize returns s as a serialized origin, "scheme://host[:port]": the
// scheme http or https, lowercase, without a default port (80 for http, 443
// for https) and without a trailing slash. It refuses anything else (a
// path, a query, user info, a wildcard, "null").
func Normalize(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || s == "" {
		return "", fmt.Errorf("%q is not an origin (scheme://host[:port])", s)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", fmt.Errorf("%q: the scheme must be http or https", s)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || u.ForceQuery {
		return "", fmt.Errorf("%q: an origin is only scheme://host[:port], with no path, query or user", s)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" || strings.ContainsAny(host, "*") {
		return "", fmt.Errorf("%q: the host must be a name or address, without wildcards", s)
	}
	port := u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		return scheme + "://" + host + ":" + port, nil
	}
	return scheme + "://" + host, nil
}

// Same reports whether the URLs a and b are on the same origin: the same
// scheme, host and port, as Normalize serializes them (a default port
// written or not, the host in any case). A URL that is not http or https
// is on no origin.
func Same(a, b *url.URL) bool {
	oa, err := Normalize(a.Scheme + "://" + a.Host)
	if err != nil {
		return false
	}
	ob, err := Normalize(b.Scheme + "://" + b.Host)
	return err == nil && oa == ob
}

// IsLoopbackHost reports whether hostport (a Host header: a name or address,
// with an optional port) names this machine: localhost, a name under
// .localhost, or a loopback address.
func IsLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
