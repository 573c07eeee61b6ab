package agentd

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestSummarizedAndAnnouncement: values over LargeValueBytes are left out
// and named by size and digest; a value at the bound, and every other
// field, stays as it was; a small call is announced exactly as before.
func TestSummarizedAndAnnouncement(t *testing.T) {
	big := json.RawMessage(`{"path":"big.txt","content":"` + strings.Repeat("x", LargeValueBytes) + `"}`)
	bigDigest, err := DigestJSON(big)
	if err != nil {
		t.Fatal(err)
	}
	diff := strings.Repeat("+x\n", LargeValueBytes/3+1)
	c := ToolCall{ID: "call_1", Name: "write_file", Method: "TOOL", Endpoint: "write_file", Reason: "asks",
		Arguments: big, ArgumentsSHA256: bigDigest, Diff: diff}
	s, om := c.Summarized()
	want := Omitted{"arguments": {Bytes: len(big), SHA256: bigDigest}, "diff": {Bytes: len(diff), SHA256: TextSHA256(diff)}}
	if !reflect.DeepEqual(om, want) || s.Arguments != nil || s.Diff != "" || s.ID != c.ID || s.ArgumentsSHA256 != bigDigest {
		t.Errorf("Summarized: %+v, %v; want %v", s, om, want)
	}
	if len(c.Arguments) != len(big) || c.Diff != diff {
		t.Error("Summarized changed the call it was given")
	}
	params, card, om2 := c.Announcement()
	if params != nil || card.Arguments != nil || card.Diff != nil || card.Title != "Run write_file?" || !reflect.DeepEqual(om2, want) {
		t.Errorf("Announcement of a large call: %s, %+v, %v", params, card, om2)
	}

	// A connection call's params over the bound: params left out, with
	// their own digest; the card's arguments are params, never arguments.
	conn := ToolCall{Name: "request", ConnectionName: "billing", Method: "POST", Endpoint: "/refunds",
		Arguments: json.RawMessage(`{"a":1}`), ArgumentsSHA256: "d", Params: big}
	params, card, om3 := conn.Announcement()
	if params != nil || card.Arguments != nil || om3["params"].SHA256 != bigDigest || len(om3) != 1 {
		t.Errorf("Announcement of large params: %s, %s, %v", params, card.Arguments, om3)
	}

	// At the bound nothing is left out.
	edge := json.RawMessage(`"` + strings.Repeat("y", LargeValueBytes-2) + `"`)
	small := ToolCall{Name: "pay", Method: "TOOL", Endpoint: "pay", Arguments: edge, ArgumentsSHA256: "d", Diff: "--- a\n"}
	if s, om := small.Summarized(); om != nil || !reflect.DeepEqual(s, small) {
		t.Errorf("a call at the bound was summarised: %v", om)
	}
	params, card, om4 := small.Announcement()
	if string(params) != string(small.CardArguments()) || !reflect.DeepEqual(card, small.Card()) || om4 != nil {
		t.Errorf("a small call's announcement differs from its card: %s %+v %v", params, card, om4)
	}
}

// TestSummarizedLeavesLargeEditsOut: a decision's edited arguments over
// LargeValueBytes (an approved edit of a call parked again) are left out of
// a summary and named by size and digest; the caller's call is unchanged.
func TestSummarizedLeavesLargeEditsOut(t *testing.T) {
	big := json.RawMessage(`{"body":"` + strings.Repeat("x", LargeValueBytes) + `"}`)
	c := ToolCall{ID: "call_1", Arguments: json.RawMessage(`{}`), Decisions: []Decision{
		{ID: "dec_1", EditedArguments: big, EditedArgumentsSHA256: "edit-digest"}}}
	got, om := c.Summarized()
	want := OmittedValue{Bytes: len(big), SHA256: "edit-digest"}
	if got.Decisions[0].EditedArguments != nil || om["decisions[0].edited_arguments"] != want {
		t.Fatalf("summary kept %d bytes of the edit; omitted %v", len(got.Decisions[0].EditedArguments), om)
	}
	if len(c.Decisions[0].EditedArguments) != len(big) {
		t.Fatal("Summarized changed the caller's decisions")
	}
}
