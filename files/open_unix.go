//go:build unix

package files

import "syscall"

// nonBlock makes opening a named pipe return at once instead of waiting
// for a writer; on regular files and folders it changes nothing.
const nonBlock = syscall.O_NONBLOCK
