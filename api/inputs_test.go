package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/api"
)

// TestInputRoutes: GET /v1/inputs passes its filters, GET /v1/inputs/{id}
// the id, and POST …/answer its body (strictly decoded) as the service
// gets them; invalid_input answers 422 with error.fields, every one.
func TestInputRoutes(t *testing.T) {
	s, fake := newFakeServer(t, nil, api.Config{})
	r := s.do("GET", "/v1/inputs?status=pending&conversation_id=conv_x&tool_name=ask_user&answerable=true&cursor=inp_a&limit=5", "", "", nil)
	want(t, "list", r, http.StatusOK, "")
	q, _ := fake.last().req.(agentd.InputQuery)
	if fake.last().method != "Inputs" || q.Status != agentd.InputPending || q.ConversationID != "conv_x" || q.ToolName != "ask_user" ||
		!q.Answerable || q.Cursor != "inp_a" || q.Limit != 5 {
		t.Fatalf("service got %+v", fake.last())
	}
	var page struct {
		Inputs []agentd.Input `json:"inputs"`
		Next   *string        `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(r.body), &page); err != nil || len(page.Inputs) != 1 || page.Next == nil {
		t.Fatalf("inputs page %s (%v)", r.body, err)
	}
	want(t, "answerable", s.do("GET", "/v1/inputs?answerable=yes", "", "", nil), http.StatusBadRequest, agentd.EINVALID)
	want(t, "one", s.do("GET", "/v1/inputs/inp_9", "", "", nil), http.StatusOK, "")
	if got := fake.last(); got.method != "Input" || got.id != "inp_9" {
		t.Fatalf("service got %+v", got)
	}

	want(t, "answer", s.do("POST", "/v1/inputs/inp_9/answer", "", `{"action":"accept","content":{"n":3}}`, nil), http.StatusOK, "")
	a, _ := fake.last().req.(agentd.InputAnswer)
	if fake.last().id != "inp_9" || a.Action != agentd.InputAccept || string(a.Content) != `{"n":3}` || a.Via != agentd.ViaSingle {
		t.Fatalf("service got %+v", fake.last())
	}
	before := fake.count()
	want(t, "unknown field", s.do("POST", "/v1/inputs/inp_9/answer", "", `{"action":"accept","value":1}`, nil), http.StatusBadRequest, agentd.EINVALID)
	if fake.count() != before {
		t.Error("a bad body reached the service")
	}
	r = s.do("POST", "/v1/inputs/inp_9/answer", "", `{"action":"accept","content":{"bad":1}}`, nil)
	want(t, "invalid input", r, http.StatusUnprocessableEntity, agentd.EINVALIDINPUT)
	var body struct {
		Error struct {
			Fields []agentd.FieldError `json:"fields"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || len(body.Error.Fields) != 2 || body.Error.Fields[0].Field != "bad" {
		t.Fatalf("422 body %s (%v)", r.body, err)
	}
}
