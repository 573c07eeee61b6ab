package mcp

import (
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
