//go:build unix

package process

import (
	"io"
	"os"
	"testing"
)

// Both ways of holding the request: the file reads back exactly the
// payload from its start, cannot be written through, and leaves no file
// in TMPDIR.
func TestRequestFile(t *testing.T) {
	payload := []byte(`{"tool":"probe","call_id":"c","input":{}}` + "\n")
	kinds := map[string]func([]byte) (*os.File, func(), error){
		"requestFile": requestFile,
		"tempFile":    tempFile,
	}
	for name, open := range kinds {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			f, done, err := open(payload)
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
				t.Errorf("TMPDIR holds %v, want nothing", entries)
			}
			if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() != int64(len(payload)) {
				t.Errorf("stat = %v, %v; want a regular file of %d bytes", st, err, len(payload))
			}
			if _, err := f.Write([]byte("x")); err == nil {
				t.Error("the request file could be written")
			}
			got, err := io.ReadAll(f)
			if err != nil || string(got) != string(payload) {
				t.Errorf("read %q, %v; want %q", got, err, payload)
			}
		})
	}
}
