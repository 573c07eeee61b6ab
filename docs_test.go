package agentd

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// Every JSON field of a tool call is in docs/api.md's table of the tool
// call object, and the table names no field that does not exist.
func TestAPIDocsToolCallFields(t *testing.T) {
	b, err := os.ReadFile("docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## The tool call object")
	end := strings.Index(doc, "## Approval rules")
	if start < 0 || end < start {
		t.Fatal(`docs/api.md has no "## The tool call object" section before "## Approval rules"`)
	}
	section := doc[start:end]
	var first strings.Builder // the first column of each table row
	for _, l := range strings.Split(section, "\n") {
		if cells := strings.Split(l, "|"); len(cells) > 2 {
			first.WriteString(cells[1])
		}
	}
	fields := map[string]bool{}
	rt := reflect.TypeOf(ToolCall{})
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "-" {
			continue // not in the JSON
		}
		fields[name] = true
		if !strings.Contains(first.String(), "`"+name+"`") {
			t.Errorf("docs/api.md: the tool call field %q is not in the table", name)
		}
	}
	for _, cell := range strings.Split(first.String(), "`") {
		if name := strings.TrimSpace(cell); name != "" && name != "field" && !strings.ContainsAny(name, ", ") && !fields[name] {
			t.Errorf("docs/api.md: the table names %q, which is no tool call field", name)
		}
	}
}
