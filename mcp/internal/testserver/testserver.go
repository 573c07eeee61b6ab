// Package testserver is the MCP server of package mcp's tests, on the
// SDK's own server: mcp/testdata/server runs it over stdio as a real
// subprocess, and the HTTP tests serve it with the SDK's streamable HTTP
// handler. Its tools:
//
//   - note {text} (no annotations: confirm tier): appends text and a
//     newline to the notes file, so a test counts the runs;
//   - lookup {q} (readOnlyHint): answers "found <q> (pid <pid>)";
//   - grow {} (readOnlyHint): adds the tool extra {}, which answers
//     "extra", and so notifies notifications/tools/list_changed;
//   - big {n} (readOnlyHint): answers n bytes of "x", then an image;
//   - wait {} (readOnlyHint): appends "waiting" to the notes file, waits
//     until the call is cancelled, then appends "cancelled".
//
// AddOddNames adds tools whose names no model may be offered.
package testserver

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// New returns the server; note appends to notesFile.
func New(notesFile string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "agentd-test", Version: "1"}, nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s, &mcp.Tool{Name: "note", Description: "Writes a note."},
		func(_ context.Context, req *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			// A traced call's trace context, as agentd sends it.
			if tp, ok := req.Params.Meta["traceparent"].(string); ok {
				if err := appendLine(notesFile, "traceparent "+tp); err != nil {
					return nil, nil, err
				}
			}
			if err := appendLine(notesFile, in.Text); err != nil {
				return nil, nil, err
			}
			return text("noted " + in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "Looks something up.", Annotations: ro},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Q string `json:"q"`
		}) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprintf("found %s (pid %d)", in.Q, os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Adds the tool extra.", Annotations: ro},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "extra", Description: "Added later.", Annotations: ro},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return text("extra"), nil, nil
				})
			return text("grown"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Answers n bytes.", Annotations: ro},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			N int `json:"n"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: strings.Repeat("x", in.N)},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte("png")},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "wait", Description: "Waits until cancelled.", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if err := appendLine(notesFile, "waiting"); err != nil {
				return nil, nil, err
			}
			<-ctx.Done()
			if err := appendLine(notesFile, "cancelled"); err != nil {
				return nil, nil, err
			}
			return nil, nil, ctx.Err()
		})
	return s
}

// OddNames are the names AddOddNames gives tools: a space, a bidi
// override, a newline, an escape, a dot, 150 letters, and 60 letters (valid
// alone, too long with a server prefix such as "notes__").
var OddNames = []string{"bad name", "evil\u202etxt.exe", "line\nbreak", "esc\x1b[31m", "dotted.name",
	strings.Repeat("a", 150), strings.Repeat("b", 60)}

// AddOddNames adds a tool of each of OddNames to s, answering "odd".
func AddOddNames(s *mcp.Server) {
	for _, name := range OddNames {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "An oddly named tool."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return text("odd"), nil, nil
			})
	}
}

func appendLine(file, line string) error {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}
