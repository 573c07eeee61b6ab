package confirm

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestGrantMatch: exact compares digests, any covers all, each
// constraint holds or fails on its own, and a path the arguments lack
// fails the match.
func TestGrantMatch(t *testing.T) {
	doc := json.RawMessage(`{"body":{"amount":40,"currency":"EUR","tags":["a"]},"path":{"id":"7"},"flag":true}`)
	for _, c := range []struct {
		match  string
		digest string
		want   bool
	}{
		{``, "d1", true},
		{`"exact"`, "d1", true},
		{`"exact"`, "d2", false},
		{`"any"`, "d2", true},
		{`{"body.amount":{"max":100}}`, "d2", true},
		{`{"body.amount":{"max":39}}`, "d2", false},
		{`{"body.amount":{"min":40,"max":40}}`, "d2", true},
		{`{"body.amount":{"min":41}}`, "d2", false},
		{`{"body.currency":{"one_of":["EUR","USD"]}}`, "d2", true},
		{`{"body.currency":{"one_of":["USD"]}}`, "d2", false},
		{`{"body.currency":{"equals":"EUR"}}`, "d2", true},
		{`{"body.currency":{"equals":"eur"}}`, "d2", false},
		{`{"path.id":{"equals":"7"}}`, "d2", true},
		{`{"path.id":{"equals":7}}`, "d2", false},
		{`{"flag":{"equals":true}}`, "d2", true},
		{`{"body.tags":{"equals":["a"]}}`, "d2", true},
		{`{"body.amount":{"max":100},"body.currency":{"one_of":["USD"]}}`, "d2", false},
		{`{"body.missing":{"max":100}}`, "d2", false},
		{`{"body.amount.x":{"max":100}}`, "d2", false},
		{`{"body.currency":{"max":100}}`, "d2", false},
	} {
		m, err := ParseGrantMatch(json.RawMessage(c.match))
		if err != nil {
			t.Fatalf("%s: %v", c.match, err)
		}
		if got := m.Matches("d1", c.digest, doc); got != c.want {
			t.Errorf("%s on digest %s: %v, want %v", c.match, c.digest, got, c.want)
		}
	}
	if m, _ := ParseGrantMatch(nil); m.Matches("", "", doc) {
		t.Error("exact with no digest matched")
	}
}

// TestParseGrantMatch: bad matches are refused with the field named.
func TestParseGrantMatch(t *testing.T) {
	for raw, want := range map[string]string{
		`"all"`:                   `remember.match: must be "exact", "any"`,
		`3`:                       `remember.match: must be`,
		`{}`:                      `needs at least one dot path`,
		`{"a..b":{"max":1}}`:      `remember.match.a..b: not a dot path`,
		`{"a":{}}`:                `remember.match.a: names no condition`,
		`{"a":{"below":1}}`:       `remember.match.a: must be an object of equals, one_of, min, max`,
		`{"a":{"one_of":[]}}`:     `remember.match.a.one_of: must list at least one value`,
		`{"a":{"min":5,"max":1}}`: `remember.match.a: min 5 is above max 1`,
		`{"a":{"max":"10"}}`:      `remember.match.a: must be an object`,
		`{"a":{"max":1,"max":2}}`: `remember.match.a`,
	} {
		_, err := ParseGrantMatch(json.RawMessage(raw))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", raw, err, want)
		}
	}
}
