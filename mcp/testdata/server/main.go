// Command server is the MCP stdio server of package mcp's tests (and of
// cmd/agentd's): the tools of mcp/internal/testserver, notes written to
// $NOTES_FILE.
package main

import (
	"context"
	"log"
	"os"

	"github.com/agentd-dev/agentd/mcp/internal/testserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := testserver.New(os.Getenv("NOTES_FILE")).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
