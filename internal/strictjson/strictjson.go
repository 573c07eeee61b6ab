// Package strictjson holds agentd's one rule for ambiguous JSON: a document
// whose objects repeat a key, or hold two keys that differ only by case, is
// refused, and so is one that is not valid UTF-8. Different JSON readers
// disagree on which of two such keys wins (Go's encoding/json even matches
// struct fields case-insensitively), so the value a check saw might not be the
// value that is used. The HTTP API applies it to every request body; confirm
// applies it to the arguments of connection calls.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckKeys returns an error naming the first key that appears twice in one
// object of doc, counting keys that differ only by case as the same, and an
// error for a doc that is not valid UTF-8 or not valid JSON. It does not
// decode values.
func CheckKeys(doc []byte) error {
	if !utf8.Valid(doc) {
		return errors.New("the JSON is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		obj  bool
		seen map[string]bool
		key  bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if len(stack) > 0 {
				return errors.New("the JSON ends inside an object or array")
			}
			return nil
		} else if err != nil {
			return err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &frame{obj: true, seen: map[string]bool{}, key: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].key = true
				}
			}
			continue
		case string:
			if top != nil && top.obj && top.key {
				k := foldKey(t)
				if top.seen[k] {
					return fmt.Errorf("the key %q appears twice in one object (keys that differ only by case count as the same)", t)
				}
				top.seen[k] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.obj {
			top.key = true
		}
	}
}

// foldKey is the key as encoding/json compares field names: every rune
// replaced by the smallest rune of its Unicode case-folding orbit (so "s",
// "S" and "ſ" (U+017F), or "k", "K" and the Kelvin sign, are one key).
func foldKey(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		b.WriteRune(r)
	}
	return b.String()
}
