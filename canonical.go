package agentd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
)

// ErrInexactNumber marks a JSON value that holds a number an IEEE 754
// double does not hold as written (CanonicalJSON).
var ErrInexactNumber = errors.New("a number a double does not hold exactly")

// CanonicalJSON is v's RFC 8785 (JCS) canonical form: the text
// arguments_sha256 covers, and the one canonical form of JSON in agentd.
// JCS reads every number as an IEEE 754 double, so two numbers that read
// as the same double (12345678901234567 and 12345678901234568) would have
// one canonical form; a value holding a number whose value is not exactly
// that of its canonical form is refused instead (an error wrapping
// ErrInexactNumber that names the number and says to send it as a string,
// I-JSON, RFC 7493 §2.2). So two values with one canonical form hold the
// same numbers, and a digest covers exactly what a tool receives. It
// fails on input that is not valid JSON too.
func CanonicalJSON(v json.RawMessage) ([]byte, error) {
	canon, err := jcs.Transform(v)
	if err != nil {
		return nil, fmt.Errorf("canonicalize arguments: %w", err)
	}
	if err := exactNumbers(v); err != nil {
		return nil, err
	}
	return canon, nil
}

// DigestJSON is the digest of a JSON value as arguments_sha256 is made:
// the lowercase hex SHA-256 of its CanonicalJSON, whose errors it returns.
func DigestJSON(v json.RawMessage) (string, error) {
	canon, err := CanonicalJSON(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// exactNumbers returns an error for the first number of v (valid JSON)
// whose value is not that of its canonical form.
func exactNumbers(v json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("canonicalize arguments: %w", err)
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		if canon, exact := exactDouble(string(n)); !exact {
			return fmt.Errorf("%w: %s reads as %s (JSON numbers are read as IEEE 754 doubles), so a digest could not tell the two apart: "+
				"send it as a string, or with at most 15 significant digits (I-JSON, RFC 7493)",
				ErrInexactNumber, TruncateUTF8(string(n), 64), canon)
		}
	}
}

// exactDouble reports whether the JSON number lit has exactly the value of
// the shortest decimal that reads back as its nearest double (what JCS
// writes for it), and returns that decimal.
func exactDouble(lit string) (string, bool) {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil { // out of a double's range
		return lit, false
	}
	canon := strconv.FormatFloat(f, 'g', -1, 64)
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 { // as JCS writes it
		canon = strconv.FormatFloat(f, 'f', -1, 64)
	}
	a, okA := decimalOf(lit)
	b, okB := decimalOf(canon)
	return canon, okA && okB && a == b
}

// decimal is a number's value as sign × 0.digits × 10^exp, digits without
// leading or trailing zeros; zero is the zero decimal whatever its sign.
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// decimalOf is the value of a JSON number literal; false when its
// exponent does not fit an int.
func decimalOf(lit string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(lit, "-") {
		d.neg, lit = true, lit[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(lit), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	point := len(intPart)
	trimmed := strings.TrimLeft(digits, "0")
	point -= len(digits) - len(trimmed)
	d.digits = strings.TrimRight(trimmed, "0")
	if d.digits == "" {
		return decimal{}, true
	}
	d.exp = point
	if hasExp {
		e, err := strconv.Atoi(expPart)
		if err != nil {
			return decimal{}, false
		}
		d.exp += e
	}
	return d, true
}
