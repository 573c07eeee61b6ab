package project

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestParseInputs: agent.json "inputs" as far as it is built (ask_user,
// timeout, answerers); anything else is refused, naming the field.
func TestParseInputs(t *testing.T) {
	r, err := parseInputs(json.RawMessage(`{"ask_user": true, "timeout": "30m", "answerers": ["owner", "group:ops"]}`))
	if err != nil || !r.AskUser || r.Timeout != 30*time.Minute || len(r.Answerers) != 2 {
		t.Fatalf("parseInputs = %+v, %v", r, err)
	}
	if r, err := parseInputs(nil); r != nil || err != nil {
		t.Errorf("absent inputs = %+v, %v; want nil", r, err)
	}
	for raw, want := range map[string]string{
		`{"ask_user": true, "reminders": ["10m"]}`: "reminders",
		`{"timeout": "soon"}`:                      "inputs.timeout",
		`{"timeout": "-1m"}`:                       "inputs.timeout",
		`{"answerers": ["owner", "someone"]}`:      "inputs.answerers",
		`{"answerers": []}`:                        "inputs.answerers",
	} {
		if _, err := parseInputs(json.RawMessage(raw)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseInputs(%s) = %v, want an error naming %s", raw, err, want)
		}
	}
}
