package process

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// seals make a memory file immutable: no write, no change of size, no
// change of the seals.
const seals = unix.F_SEAL_WRITE | unix.F_SEAL_GROW | unix.F_SEAL_SHRINK | unix.F_SEAL_SEAL

// memoryFile returns a sealed memory file (memfd) that holds exactly
// payload, positioned at its start. It needs no writable folder.
func memoryFile(payload []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("agentd-request", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "agentd-request")
	if _, err := f.Write(payload); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
