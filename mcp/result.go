package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/schema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// newValidator compiles a tool's input schema into confirm.Tool's
// Validate: the arguments must be a JSON object valid against it; the
// effective arguments are the compacted object. Its errors' text is meant
// for the model.
func newValidator(name string, raw json.RawMessage) (func(json.RawMessage) (json.RawMessage, error), error) {
	sch, err := schema.Compile(name, raw)
	if err != nil {
		return nil, err
	}
	return func(args json.RawMessage) (json.RawMessage, error) {
		trimmed := bytes.TrimSpace(args)
		if len(trimmed) == 0 {
			trimmed = []byte("{}")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, trimmed); err != nil {
			return nil, fmt.Errorf("invalid arguments for tool %q: not valid JSON", name)
		}
		if buf.Bytes()[0] != '{' {
			return nil, fmt.Errorf("invalid arguments for tool %q: must be a JSON object", name)
		}
		if err := schema.Validate(sch, buf.Bytes()); err != nil {
			return nil, fmt.Errorf("invalid arguments for tool %q: %v", name, err)
		}
		return json.RawMessage(buf.Bytes()), nil
	}, nil
}

// resultText is the text the model reads of a tool result: its text
// content joined by newlines, other content summarised in brackets
// ("[image image/png, 2048 bytes]"), the structured content as JSON when
// there is no content, cut to at most limit bytes with a note saying so.
func resultText(res *sdk.CallToolResult, limit int) string {
	var parts []string
	for _, c := range res.Content {
		parts = append(parts, contentText(c))
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	text := strings.Join(parts, "\n")
	if len(text) <= limit {
		return text
	}
	note := fmt.Sprintf("\n[cut: the result was %d bytes; the first %d are shown]", len(text), limit)
	return agentd.TruncateUTF8(text, limit-len(note)) + note
}

func contentText(c sdk.Content) string {
	switch c := c.(type) {
	case *sdk.TextContent:
		return c.Text
	case *sdk.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data))
	case *sdk.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data))
	case *sdk.ResourceLink:
		return fmt.Sprintf("[resource link %s]", c.URI)
	case *sdk.EmbeddedResource:
		if r := c.Resource; r != nil {
			if r.Text != "" {
				return r.Text
			}
			return fmt.Sprintf("[resource %s %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob))
		}
		return "[resource]"
	}
	return fmt.Sprintf("[%T content]", c)
}
