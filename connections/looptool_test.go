package connections_test

import (
	"github.com/agentd-dev/agentd/connections"
	"github.com/agentd-dev/agentd/toolset"
)

// The request tool and every connection are tool sources.
var (
	_ toolset.Source = (*connections.RequestTool)(nil)
	_ toolset.Source = (*connections.Connection)(nil)
)
