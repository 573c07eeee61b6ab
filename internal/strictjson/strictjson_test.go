package strictjson

import (
	"encoding/json"
	"testing"
)

func TestCheckKeys(t *testing.T) {
	for _, tc := range []struct {
		doc string
		ok  bool
	}{
		{`{"decision":"approve","reason":"x"}`, true},
		{`{"a":{"b":1},"c":[{"b":1},{"b":2}]}`, true},
		{`{"decision":"approve","decision":"deny"}`, false},
		{`{"decision":"approve","DeCiSiOn":"deny"}`, false},
		{`{"decision":"approve","deciſion":"deny"}`, false}, // U+017F folds to s, as encoding/json matches it
		{`{"kind":1,"Kind":2}`, false},                      // U+212A Kelvin sign folds to k
		{`{"a":{"x":1,"X":2}}`, false},
		{`[{"x":1},{"X":2}]`, true}, // different objects
		{"{\"a\":\"\xff\"}", false},
		{`{"a":`, false},
	} {
		err := CheckKeys([]byte(tc.doc))
		if (err == nil) != tc.ok {
			t.Errorf("CheckKeys(%s) = %v, want ok %v", tc.doc, err, tc.ok)
		}
	}
}

// Every pair of keys encoding/json would match to one field is refused.
func TestCheckKeysAgreesWithEncodingJSON(t *testing.T) {
	for _, key := range []string{"Decision", "DECISION", "deciſion", "DECIſION", "decision"} {
		var v struct {
			Decision string `json:"decision"`
		}
		doc := `{"` + key + `":"x"}`
		if err := json.Unmarshal([]byte(doc), &v); err != nil || v.Decision != "x" {
			t.Fatalf("encoding/json does not match %q to decision", key)
		}
		if key != "decision" && CheckKeys([]byte(`{"decision":"y","`+key+`":"x"}`)) == nil {
			t.Errorf("%q beside decision passed", key)
		}
	}
}
