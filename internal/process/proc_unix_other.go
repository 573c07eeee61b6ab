//go:build unix && !linux

package process

import "syscall"

// setParentDeathSignal does nothing: only Linux kills the command when the
// server dies.
func setParentDeathSignal(*syscall.SysProcAttr) {}
