package process

import "os"

// requestFile returns a file, positioned at its start, that holds exactly
// payload and that the command cannot change, and the function that
// releases it once the command is done. The file has no name in any
// folder by the time requestFile returns (on Linux it is in memory,
// elsewhere on Unix an unlinked temporary file), so nothing is left
// behind whatever becomes of the server; where an open file cannot be
// unlinked, done removes it.
func requestFile(payload []byte) (f *os.File, done func(), err error) {
	if f, err := memoryFile(payload); err == nil {
		return f, func() { f.Close() }, nil
	}
	return tempFile(payload)
}

// tempFile is requestFile in a read-only handle on a temporary file in the
// server's TMPDIR, unlinked at once where the system allows it.
func tempFile(payload []byte) (f *os.File, done func(), err error) {
	w, err := os.CreateTemp("", "agentd-request-*")
	if err != nil {
		return nil, nil, err
	}
	name := w.Name()
	f, err = os.Open(name)
	unlinked := os.Remove(name) == nil // an open file stays readable on Unix
	done = func() {
		if f != nil {
			f.Close()
		}
		if !unlinked {
			os.Remove(name)
		}
	}
	if err == nil {
		_, err = w.Write(payload)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		done()
		return nil, nil, err
	}
	return f, done, nil
}
