//go:build !unix

package process

import "os/exec"

// setSysProcAttr does nothing where process groups are not supported.
func setSysProcAttr(*exec.Cmd) {}

// killProcessGroup kills only the command itself where process groups are
// not supported.
func killProcessGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}
