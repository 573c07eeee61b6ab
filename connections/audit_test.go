package connections

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/rs/zerolog"
)

// auditLog is an in-memory AuditLog; with fail set it refuses every entry.
type auditLog struct {
	mu      sync.Mutex
	entries []agentd.AuditEntry
	fail    bool
}

func (a *auditLog) AppendAudit(_ context.Context, e agentd.AuditEntry) (agentd.AuditEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail {
		return e, errors.New("store down")
	}
	a.entries = append(a.entries, e)
	return e, nil
}

// Every request the durable path answers is in the audit log: who, what,
// and how it ended — a preview, a performed write, a refusal, an unknown
// connection. A log that cannot record does not change the answer.
func TestDurableRequestsAudited(t *testing.T) {
	api := newRecorder(t, nil)
	conn := loadConn(t, `{"base_url":"`+api.URL+`"}`, nil, map[string]string{"policy.json": `{"endpoints": {
		"POST /refunds": {"confirm": true},
		"DELETE /refunds/{id}": {"confirm": "never", "reason": "never"}}}`})
	log := &auditLog{}
	d := NewDurable([]*Connection{conn}, WithAudit(log, zerolog.Nop()))
	p := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleDelegate, KeyID: "key-d"}
	for _, c := range []struct {
		name, args, outcome string
	}{
		{"api", `{"connection":"api","method":"POST","endpoint":"/refunds","data":{"amount":1},"intent":"write"}`, "preview"},
		{"api", `{"connection":"api","method":"POST","endpoint":"/refunds","data":{"amount":1},"intent":"confirmed_write"}`, "performed"},
		{"api", `{"connection":"api","method":"DELETE","endpoint":"/refunds/7","intent":"confirmed_write"}`, agentd.EFORBIDDEN},
		{"ghost", `{"connection":"ghost","method":"GET","endpoint":"/x","intent":"read"}`, agentd.ENOTFOUND},
	} {
		_, _, _ = durableAs(d, p, c.name, c.args, "")
		e := log.entries[len(log.entries)-1]
		if e.Kind != agentd.AuditConnectionRequest || e.Outcome != c.outcome || e.Connection != c.name || e.KeyID != "key-d" ||
			e.Role != agentd.RoleDelegate || e.TenantID != "t1" || e.ProjectID != "p1" || e.Method == "" || e.Endpoint == "" {
			t.Errorf("%s: entry %+v, want outcome %s", c.args, e, c.outcome)
		}
	}
	if n := len(log.entries); n != 4 {
		t.Fatalf("%d entries, want 4", n)
	}
	if e := log.entries[1]; e.Reason != "downstream status 200" || e.Method != "POST" || e.Endpoint != "/refunds" || e.ArgumentsSHA256 == "" {
		t.Errorf("performed entry = %+v", e)
	}
	log.fail = true
	out, _, err := durableAs(d, p, "api", `{"connection":"api","method":"GET","endpoint":"/x","intent":"read"}`, "")
	if _, ok := out.(Result); err != nil || !ok {
		t.Errorf("a failing audit log changed the answer: %v %v", out, err)
	}
}
