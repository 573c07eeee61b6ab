package loop

import (
	"context"
	"time"

	"github.com/agentd-dev/agentd"
)

// mayDecideNow is Engine.MayDecideNow.
func (e *decider) mayDecideNow(ctx context.Context, p agentd.Principal, id string) (*agentd.ToolCall, error) {
	if !p.MayDecide() {
		return nil, agentd.Errorf(agentd.EFORBIDDEN, "delegate keys never decide approvals")
	}
	c, err := e.toolCall(ctx, p, id)
	if err != nil {
		return nil, err
	}
	if err := e.mayDecide(ctx, p, c); err != nil {
		return nil, err
	}
	switch {
	case c.Status == agentd.StatusExpired:
		return nil, agentd.Errorf(agentd.EEXPIRED, "the approval deadline passed; nothing was done")
	case c.Status != agentd.StatusRequiresConfirmation:
		return nil, agentd.Errorf(agentd.ECONFLICT, "the call is not awaiting confirmation (status %s)", c.Status)
	case c.RequiresApprovalAt != nil && !e.clock.Now().Before(*c.RequiresApprovalAt):
		return nil, agentd.Errorf(agentd.EEXPIRED, "the approval deadline passed at %s", c.RequiresApprovalAt.UTC().Format(time.RFC3339))
	}
	return c, nil
}
