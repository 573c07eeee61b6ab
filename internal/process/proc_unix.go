//go:build unix

package process

import (
	"errors"
	"os/exec"
	"syscall"
)

// setSysProcAttr makes the command the leader of a new process group, so
// that everything it starts can be killed with it, and, where the system
// offers it, has the command killed when the server dies.
func setSysProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
}

// killProcessGroup kills the command's whole process group with SIGKILL.
func killProcessGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
