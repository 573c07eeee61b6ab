package process

import "syscall"

// setParentDeathSignal has the kernel send SIGKILL to the command when the
// thread that started it ends, which runCommand makes the same as when
// the server process ends. The signal reaches the command only, not what
// it started; a set-user-ID or set-group-ID program loses it on exec.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
