//go:build !linux

package mcp

import "os/exec"

// setProcAttr does nothing here: only Linux kills a child when its parent
// dies; agentd closes its servers when it shuts down.
func setProcAttr(*exec.Cmd) {}
