package mcp

import (
	"os/exec"
	"syscall"
)

// setProcAttr has the kernel kill a stdio server when agentd dies, so no
// server outlives the process that started it. (The signal follows the
// thread that started the server; the Go runtime does not end its threads
// while the process runs, except locked ones, which this package never
// starts a server from.)
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
