package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// parkNote parks a call with a note of n bytes in a new conversation and
// returns its id.
func (s *server) parkNote(n int) string {
	s.t.Helper()
	conv := s.createConversation("")
	r := s.do("POST", "/v1/conversations/"+conv+"/messages", "", fmt.Sprintf(`{"content":"note %d"}`, n), nil)
	want(s.t, "send", r, http.StatusAccepted, "")
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		r := s.do("GET", "/v1/approvals?status=pending&conversation_id="+conv, "", "", nil)
		var page struct{ Approvals []struct{ ID string } }
		if err := json.Unmarshal([]byte(r.body), &page); err != nil {
			s.t.Fatalf("approvals: %s", r.body)
		}
		if len(page.Approvals) == 1 {
			return page.Approvals[0].ID
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatal("no parked call")
	return ""
}

// listedCall is one entry of a GET /v1/approvals page.
type listedCall struct {
	ID              string                         `json:"id"`
	Arguments       json.RawMessage                `json:"arguments"`
	ArgumentsSHA256 string                         `json:"arguments_sha256"`
	Omitted         map[string]agentd.OmittedValue `json:"omitted"`
}

// TestApprovalsPageBoundedInBytes: a page of GET /v1/approvals stays within
// its byte bound, large arguments are listed by size and digest (the
// whole call is GET /v1/tool-calls/{id}), and the cursor walks every call
// once, in order, however the bound cuts the pages.
func TestApprovalsPageBoundedInBytes(t *testing.T) {
	const maxPage = 16 << 10
	s := newServer(t, nil, api.Config{MaxPageBytes: maxPage})
	sizes := []int{10, 10, 6000, 800_000, 10, 6000, 6000, 10}
	var ids []string
	for _, n := range sizes {
		ids = append(ids, s.parkNote(n))
	}
	big := ids[3]

	var seen []string
	cursor, pages := "", 0
	for {
		r := s.do("GET", "/v1/approvals?status=pending&cursor="+cursor, "", "", nil)
		want(t, "page", r, http.StatusOK, "")
		pages++
		var page struct {
			Approvals  []listedCall `json:"approvals"`
			NextCursor string       `json:"next_cursor"`
		}
		if err := json.Unmarshal([]byte(r.body), &page); err != nil {
			t.Fatal(err)
		}
		if len(r.body) > maxPage {
			t.Errorf("page %d is %d bytes, over the bound %d", pages, len(r.body), maxPage)
		}
		if len(page.Approvals) == 0 {
			t.Fatalf("page %d is empty with next_cursor %q", pages, cursor)
		}
		for _, c := range page.Approvals {
			seen = append(seen, c.ID)
			if c.ID != big {
				if c.Omitted != nil || len(c.Arguments) == 0 {
					t.Errorf("a small call was summarised: %+v", c)
				}
				continue
			}
			om, ok := c.Omitted["arguments"]
			if !ok || string(c.Arguments) != "null" {
				t.Fatalf("the 0.8 MB call is listed with its arguments (%d bytes), omitted %v", len(c.Arguments), c.Omitted)
			}
			whole := s.toolCall("", big)
			if om.Bytes != len(whole.Arguments) || om.Bytes < 800_000 || om.SHA256 != whole.ArgumentsSHA256 || c.ArgumentsSHA256 != whole.ArgumentsSHA256 {
				t.Errorf("marker %+v, the whole call has %d bytes of arguments with digest %s", om, len(whole.Arguments), whole.ArgumentsSHA256)
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if strings.Join(seen, ",") != strings.Join(ids, ",") {
		t.Errorf("the pages listed\n%v\nwant every parked call once, in order\n%v", seen, ids)
	}
	if pages < 2 {
		t.Errorf("%d page(s): the byte bound never cut a page", pages)
	}
}
