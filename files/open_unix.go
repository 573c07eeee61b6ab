//go:build unix

package files

import (
	"fmt"
	"io/fs"
	"syscall"
)

// nonBlock makes opening a named pipe return at once instead of waiting
// for a writer; on regular files and folders it changes nothing.
const nonBlock = syscall.O_NONBLOCK

// fileID is a file's identity, "<device>:<inode>", and its number of hard
// links.
func fileID(info fs.FileInfo) (string, uint64) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return "", 1
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino), uint64(st.Nlink)
}
