package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
)

// testChildJournal: an entry reads back as recorded; a second entry of the
// same key is ECONFLICT and the first stays; another ordinal or call is
// its own key; a missing entry is ENOTFOUND; bad input is EINVALID.
func testChildJournal(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	e := agentd.JournalEntry{TenantID: "t1", ToolCallID: "call_1", Ordinal: 1, Digest: "d1",
		Result: []byte(`{"status":200,"body":{"ok":true}}`), CreatedAt: at}
	if err := s.JournalChild(ctx, e); err != nil {
		t.Fatalf("JournalChild: %v", err)
	}
	got, err := s.JournaledChild(ctx, "t1", "call_1", 1)
	if err != nil {
		t.Fatalf("JournaledChild: %v", err)
	}
	if got.Digest != "d1" || string(got.Result) != string(e.Result) || !got.CreatedAt.Equal(at) ||
		got.TenantID != "t1" || got.ToolCallID != "call_1" || got.Ordinal != 1 {
		t.Errorf("JournaledChild = %+v, want %+v", got, e)
	}
	again := e
	again.Digest, again.Result = "d2", []byte(`"other"`)
	if err := s.JournalChild(ctx, again); agentd.ErrorCode(err) != agentd.ECONFLICT {
		t.Errorf("second JournalChild of the key = %v, want ECONFLICT", err)
	}
	if got, _ := s.JournaledChild(ctx, "t1", "call_1", 1); got == nil || got.Digest != "d1" {
		t.Errorf("after the conflict the entry is %+v, want the first", got)
	}
	for _, k := range []struct {
		call    string
		ordinal int
	}{{"call_1", 2}, {"call_2", 1}} {
		if _, err := s.JournaledChild(ctx, "t1", k.call, k.ordinal); agentd.ErrorCode(err) != agentd.ENOTFOUND {
			t.Errorf("JournaledChild(%s, %d) = %v, want ENOTFOUND", k.call, k.ordinal, err)
		}
	}
	second := agentd.JournalEntry{TenantID: "t1", ToolCallID: "call_1", Ordinal: 2, Digest: "d3", Result: []byte(`null`)}
	if err := s.JournalChild(ctx, second); err != nil {
		t.Fatalf("JournalChild of ordinal 2 (no time: now): %v", err)
	}
	if got, err := s.JournaledChild(ctx, "t1", "call_1", 2); err != nil || got.Digest != "d3" || got.CreatedAt.IsZero() {
		t.Errorf("JournaledChild(call_1, 2) = %+v, %v", got, err)
	}
	for _, bad := range []agentd.JournalEntry{
		{ToolCallID: "c", Ordinal: 1, Digest: "d"},
		{TenantID: "t", Ordinal: 1, Digest: "d"},
		{TenantID: "t", ToolCallID: "c", Ordinal: 1},
		{TenantID: "t", ToolCallID: "c", Ordinal: 0, Digest: "d"},
	} {
		if err := s.JournalChild(ctx, bad); agentd.ErrorCode(err) != agentd.EINVALID {
			t.Errorf("JournalChild(%+v) = %v, want EINVALID", bad, err)
		}
	}
}

// testChildJournalTenants: the same call id and ordinal under two tenants
// are two entries, and one tenant never reads the other's.
func testChildJournalTenants(t *testing.T, s agentd.Store) {
	ctx := context.Background()
	if err := s.JournalChild(ctx, agentd.JournalEntry{TenantID: "acme", ToolCallID: "call_x", Ordinal: 1, Digest: "a", Result: []byte(`"acme"`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JournaledChild(ctx, "globex", "call_x", 1); agentd.ErrorCode(err) != agentd.ENOTFOUND {
		t.Errorf("another tenant's JournaledChild = %v, want ENOTFOUND", err)
	}
	if err := s.JournalChild(ctx, agentd.JournalEntry{TenantID: "globex", ToolCallID: "call_x", Ordinal: 1, Digest: "g", Result: []byte(`"globex"`)}); err != nil {
		t.Fatalf("the same key under another tenant: %v", err)
	}
	for tenant, want := range map[string]string{"acme": `"acme"`, "globex": `"globex"`} {
		if got, err := s.JournaledChild(ctx, tenant, "call_x", 1); err != nil || string(got.Result) != want {
			t.Errorf("JournaledChild(%s) = %+v, %v, want result %s", tenant, got, err, want)
		}
	}
}
