package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd-dev/agentd"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

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
