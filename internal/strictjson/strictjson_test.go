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

// A key repeated after a nested object or array is still a key twice in
// its object; distinct keys after nested values are accepted.
func TestCheckKeysAfterNestedValues(t *testing.T) {
	for _, tc := range []struct {
		doc string
		ok  bool
	}{
		{`{"decision":"deny","arguments":{"amount":1},"decision":"approve"}`, false},
		{`{"decision":"deny","arguments":[{"amount":1},[2]],"decision":"approve"}`, false},
		{`{"a":{"b":{"c":1}},"A":2}`, false},
		{`{"decision":"deny","arguments":{"amount":1,"decision":"x"},"reason":"r"}`, true},
		{`{"a":[{"x":1}],"b":{"x":[1,{"x":2}]},"c":"x"}`, true},
		{`{"a":{},"b":[],"c":{"a":{},"b":[]}}`, true},
	} {
		if err := CheckKeys([]byte(tc.doc)); (err == nil) != tc.ok {
			t.Errorf("CheckKeys(%s) = %v, want ok %v", tc.doc, err, tc.ok)
		}
	}
}

// Unmarshal matches keys to fields exactly, at every depth, where
// encoding/json would match them in any case.
func TestUnmarshalExactKeys(t *testing.T) {
	type inner struct {
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason,omitempty"`
	}
	type outer struct {
		Parts []inner          `json:"parts"`
		Raw   json.RawMessage  `json:"raw"`
		ByKey map[string]inner `json:"byKey"`
		Plain string
	}
	for _, tc := range []struct {
		doc   string
		known bool
		ok    bool
	}{
		{`{"parts":[{"approved":true}],"raw":{"APPROVED":1},"byKey":{"x":{"reason":"r"}},"Plain":"p"}`, true, true},
		{`{"parts":[{"APPROVED":true}]}`, false, false},
		{`{"parts":[{"Approved":true}]}`, true, false},
		{`{"byKey":{"x":{"REASON":"r"}}}`, false, false},
		{`{"PARTS":[]}`, false, false},
		{`{"plain":"p"}`, false, false}, // the field's name is Plain
		{`{"other":1}`, false, true},    // unknown, ignored
		{`{"other":1}`, true, false},    // unknown, refused
		{`{"parts":[{"approved":true}],"parts":[]}`, false, false},
		{`{"parts":{}}`, false, false}, // wrong type
		{`{"parts":[]} {}`, false, false},
	} {
		var v outer
		if err := Unmarshal([]byte(tc.doc), &v, tc.known); (err == nil) != tc.ok {
			t.Errorf("Unmarshal(%s, known %v) = %v, want ok %v", tc.doc, tc.known, err, tc.ok)
		}
	}
	var v outer
	if err := Unmarshal([]byte(`{"parts":[{"approved":false,"reason":"no"}],"Plain":"p"}`), &v, true); err != nil ||
		len(v.Parts) != 1 || *v.Parts[0].Approved || v.Parts[0].Reason != "no" || v.Plain != "p" {
		t.Fatalf("decoded %+v, %v", v, err)
	}
}
