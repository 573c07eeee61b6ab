package connections_test

import (
	"github.com/agentd-dev/agentd/connections"
	"github.com/agentd-dev/agentd/loop"
)

// The connection tools are loop tools.
var (
	_ loop.Tool = (*connections.RequestTool)(nil)
	_ loop.Tool = (*connections.OperationTool)(nil)
)
