package agentd

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestDigestJSONRefusesInexactNumbers: a number whose value is not exactly
// that of its canonical form (JCS reads numbers as doubles) has no digest,
// so two different integers above 2^53 never share one; numbers a double
// holds as written keep their digest, whatever their spelling.
func TestDigestJSONRefusesInexactNumbers(t *testing.T) {
	for _, lit := range []string{
		"12345678901234567", "9007199254740993", "-9007199254740993", "1152921504606846976", // 2^60, written out
		"3.14159265358979323846", "0.10000000000000000001", "1e-400", "1e400", "123456789012345678901234567890",
	} {
		args := json.RawMessage(`{"account":` + lit + `,"note":"x"}`)
		d, err := DigestJSON(args)
		if !errors.Is(err, ErrInexactNumber) && !(lit == "1e400" && err != nil) {
			t.Errorf("DigestJSON(%s) = %q, %v; want ErrInexactNumber", args, d, err)
			continue
		}
		if lit != "1e400" && (!strings.Contains(err.Error(), lit) || !strings.Contains(err.Error(), "as a string")) {
			t.Errorf("the error for %s does not name the number and the remedy: %v", lit, err)
		}
	}
	// Nested in arrays and objects alike.
	if _, err := DigestJSON(json.RawMessage(`{"a":[1,{"b":[2,12345678901234568,9007199254740993]}]}`)); !errors.Is(err, ErrInexactNumber) {
		t.Errorf("a nested inexact number: %v", err)
	}

	same := func(a, b string) {
		t.Helper()
		da, errA := DigestJSON(json.RawMessage(a))
		db, errB := DigestJSON(json.RawMessage(b))
		if errA != nil || errB != nil || da != db {
			t.Errorf("DigestJSON(%s) = %q, %v; DigestJSON(%s) = %q, %v; want one digest", a, da, errA, b, db, errB)
		}
	}
	same(`{"n":9007199254740992}`, `{"n":9.007199254740992e15}`) // 2^53, exact
	same(`{"n":12345678901234568}`, `{"n":12345678901234568.0}`)
	same(`{"n":0.1,"m":-0,"k":1E2}`, `{"k":100,"m":0,"n":1e-1}`)
	same(`{"n":1152921504606847000}`, `{"n":1.152921504606847e18}`)
	same(`{"n":0.30000000000000004}`, `{"n":3.0000000000000004E-1}`)

	if _, err := DigestJSON(json.RawMessage(`{"n":`)); err == nil || errors.Is(err, ErrInexactNumber) {
		t.Errorf("invalid JSON: %v", err)
	}
}
