package connections_test

import (
	"github.com/agentd-dev/agentd/connections"
	"github.com/agentd-dev/agentd/loop"
)

// The request tool and every connection are tool sources.
var (
	_ loop.ToolSource = (*connections.RequestTool)(nil)
	_ loop.ToolSource = (*connections.Connection)(nil)
)
