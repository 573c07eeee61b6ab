package mcp

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A server's tenant_ids are checked at load and carried to its tools.
func TestTenantIDs(t *testing.T) {
	c, err := Parse([]byte(`{"servers": [{"id": "notes", "command": ["x"], "tenant_ids": ["t1", "t2"]}, {"id": "crm", "command": ["y"]}]}`), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Servers[0].TenantIDs; !slices.Equal(got, []string{"t1", "t2"}) || c.Servers[1].TenantIDs != nil {
		t.Fatalf("tenant ids: %v, %v", got, c.Servers[1].TenantIDs)
	}
	for _, tc := range []struct{ ids, want string }{
		{`[]`, `field "servers[0].tenant_ids": lists no tenant`},
		{`"t1"`, `field "servers[0].tenant_ids": must be an array of tenant ids`},
		{`["t1", ""]`, `field "servers[0].tenant_ids[1]": is empty`},
		{`["t1", "t1"]`, `field "servers[0].tenant_ids[1]": "t1" is listed twice`},
	} {
		_, err := Parse([]byte(`{"servers": [{"id": "notes", "command": ["x"], "tenant_ids": `+tc.ids+`}]}`), t.TempDir(), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("tenant_ids %s: %v, want %q", tc.ids, err, tc.want)
		}
	}
}

// A server id is checked, so that <id>__<tool> names the tool of one
// server only.
func TestServerID(t *testing.T) {
	for _, id := range []string{"a", "notes", "a-b_c", "a-", "a" + strings.Repeat("b", 39)} {
		if _, err := Parse([]byte(`{"servers": [{"id": "`+id+`", "command": ["x"]}]}`), t.TempDir(), nil); err != nil {
			t.Errorf("id %q: %v", id, err)
		}
	}
	for _, id := range []string{"", "A", "1a", "a__b", "a_", "a" + strings.Repeat("b", 40), "a.b", "é"} {
		_, err := Parse([]byte(`{"servers": [{"id": "`+id+`", "command": ["x"]}]}`), t.TempDir(), nil)
		if err == nil || !strings.Contains(err.Error(), `field "servers[0].id"`) {
			t.Errorf("id %q: %v", id, err)
		}
	}
}

// Each wrong field of a server is refused with the field named, and
// nothing is loaded.
func TestServerFieldErrors(t *testing.T) {
	getenv := func(name string) string {
		if name == "SET" {
			return "v"
		}
		return ""
	}
	for _, tc := range []struct{ server, want string }{
		{`{"id": "a"}`, `field "servers[0]": needs "command"`},
		{`{"id": "a", "command": ["x"], "url": "http://h/"}`, `has both "command"`},
		{`{"id": "a", "command": [""]}`, `field "servers[0].command[0]"`},
		{`{"id": "a", "command": ["x"], "headers_env": {"A": "SET"}}`, `field "servers[0].headers_env": is for HTTP servers`},
		{`{"id": "a", "command": ["x"], "env": ["1X"]}`, `field "servers[0].env[0]"`},
		{`{"id": "a", "url": "ftp://h/"}`, `field "servers[0].url"`},
		{`{"id": "a", "url": "http:///x"}`, `field "servers[0].url"`},
		{`{"id": "a", "url": "http://h/", "env": ["SET"]}`, `field "servers[0].env": is for stdio servers`},
		{`{"id": "a", "url": "http://h/", "headers_env": {"Bad Header": "SET"}}`, `must be an HTTP header name`},
		{`{"id": "a", "url": "http://h/", "headers_env": {"A": "1X"}}`, `must be an environment variable name`},
		{`{"id": "a", "url": "http://h/", "headers_env": {"A": "UNSET"}}`, `environment variable UNSET is not set`},
		{`{"id": "a", "command": ["x"], "timeout_ms": 0}`, `field "servers[0].timeout_ms"`},
		{`{"id": "a", "command": ["x"], "timeout_ms": 3600001}`, `field "servers[0].timeout_ms"`},
	} {
		c, err := Parse([]byte(`{"servers": [`+tc.server+`]}`), t.TempDir(), getenv)
		if err == nil || c != nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.server, err, tc.want)
		}
	}
	for _, ms := range []int64{1, 3600000} {
		c, err := Parse([]byte(fmt.Sprintf(`{"servers": [{"id": "a", "command": ["x"], "timeout_ms": %d}]}`, ms)), t.TempDir(), nil)
		if err != nil || c.Servers[0].Timeout.Milliseconds() != ms {
			t.Errorf("timeout_ms %d: %v", ms, err)
		}
	}
	c, err := Parse([]byte(`{"servers": [{"id": "a", "url": "https://h/mcp", "headers_env": {"Authorization": "SET"}}]}`), t.TempDir(), getenv)
	if err != nil || c.Servers[0].Headers["Authorization"] != "v" || c.Servers[0].URL != "https://h/mcp" {
		t.Errorf("an HTTP server: %+v, %v", c, err)
	}
}
