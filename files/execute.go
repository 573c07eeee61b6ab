package files

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/agentd-dev/agentd"
)

// Execute runs a call: the effective arguments were checked by validate
// and the call was cleared to run. A write, edit or delete first checks
// that the file is still what the approval saw (call.StateSHA256) and
// writes nothing if not.
func (s *Source) Execute(ctx context.Context, call agentd.ToolCall) (json.RawMessage, error) {
	var a args
	if err := json.Unmarshal(call.Arguments, &a); err != nil {
		return nil, fmt.Errorf("invalid arguments: %v", err)
	}
	p, err := CleanPath(a.Path, call.Name == ListFiles)
	if err != nil {
		return nil, err
	}
	a.Path = p
	switch call.Name {
	case ListFiles:
		return s.list(a.Path)
	case ReadFile:
		f, err := s.current(a.Path)
		if err != nil {
			return nil, err
		} else if f == nil {
			return nil, fmt.Errorf("%s does not exist", a.Path)
		}
		return json.Marshal(map[string]any{"path": a.Path, "bytes": len(f.content), "content": string(f.content)})
	case WriteFile, EditFile, DeleteFile:
		return s.apply(call, a)
	}
	return nil, fmt.Errorf("tool %q is not one of the file tools", call.Name)
}

// apply performs an approved write, edit or delete and says what changed.
func (s *Source) apply(call agentd.ToolCall, a args) (json.RawMessage, error) {
	ch, err := s.change(call.Name, a)
	if err != nil {
		return nil, err
	}
	if call.StateSHA256 != "" && ch.state != call.StateSHA256 {
		if call.Name == WriteFile && ch.existed && bytes.Equal(ch.old, ch.new) {
			// The file holds what was approved: this call wrote it before a
			// crash and recovery runs it again (write_file is idempotent).
			return json.Marshal(map[string]any{"path": a.Path, "action": "unchanged", "bytes": len(ch.new),
				"note": "the file already holds this content"})
		}
		return nil, fmt.Errorf("%s changed after the approval, so nothing was written", a.Path)
	}
	added, removed := countLines(ch.diff())
	if ch.remove {
		if err := s.root.Remove(a.Path); err != nil {
			return nil, outside(a.Path, err)
		}
		if ch.link != "" {
			return json.Marshal(map[string]any{"path": a.Path, "action": "deleted", "symlink_to": ch.link,
				"note": "only the symbolic link was removed; its target was not changed"})
		}
		return json.Marshal(map[string]any{"path": a.Path, "action": "deleted", "bytes_removed": len(ch.old), "lines_removed": removed})
	}
	if dir := path.Dir(a.Path); dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			return nil, outside(a.Path, err)
		}
	}
	if err := s.write(ch); err != nil {
		return nil, err
	}
	action := "edited"
	switch {
	case call.Name == WriteFile && ch.existed:
		action = "replaced"
	case call.Name == WriteFile:
		action = "created"
	}
	return json.Marshal(map[string]any{"path": a.Path, "action": action, "bytes": len(ch.new),
		"lines_added": added, "lines_removed": removed})
}

// write puts the change's new content in its file, only while the path
// still names the file the change was read from (the same identity, one
// link, the same content) or, for a new file, nothing: the file is opened
// first and checked, and its content read, through a descriptor, so
// nothing swapped in or edited in place after the change was computed is
// written over. The new content goes to a temporary file in the same
// folder, which then takes the file's place in one rename (a new file: one
// link, which fails if the name was taken meanwhile), so a crash leaves the
// old file or the new one, never part of one. A file reached through a
// symbolic link is written in place, through the link, as before.
func (s *Source) write(ch *change) error {
	perm := fs.FileMode(0o644)
	if ch.existed {
		info, err := s.root.Lstat(ch.path)
		if err != nil {
			return outside(ch.path, err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return s.writeInPlace(ch)
		}
		if perm, err = s.checkUnchanged(ch); err != nil {
			return err
		}
	} else if _, err := s.root.Lstat(ch.path); err == nil {
		return fmt.Errorf("%s was created after the approval, so nothing was written", ch.path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return outside(ch.path, err)
	}
	tmp, err := s.writeTemp(ch, perm)
	if err != nil {
		return err
	}
	defer func() { _ = s.root.Remove(tmp) }() // gone after a rename; else what is left of a failure
	if err := beforeReplace(); err != nil {
		return fmt.Errorf("%s: %v", ch.path, err)
	}
	if ch.existed {
		err = s.root.Rename(tmp, ch.path)
	} else if err = s.root.Link(tmp, ch.path); errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s was created after the approval, so nothing was written", ch.path)
	}
	if err != nil {
		return fmt.Errorf("%s: %v", ch.path, unwrapPath(err))
	}
	s.syncDir(ch.path)
	return nil
}

// beforeReplace runs between the temporary file's write and the rename;
// tests make it fail as a crash would.
var beforeReplace = func() error { return nil }

// checkUnchanged opens the change's file and checks it (checkFile); it
// returns its mode.
func (s *Source) checkUnchanged(ch *change) (fs.FileMode, error) {
	f, err := s.root.OpenFile(ch.path, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return 0, outside(ch.path, err)
	}
	defer f.Close()
	return checkFile(f, ch)
}

// checkFile checks that f, open at its start, is the file, with the
// content, the change was computed from; it returns its mode.
func checkFile(f *os.File, ch *change) (fs.FileMode, error) {
	info, err := f.Stat()
	if err != nil {
		return 0, outside(ch.path, err)
	}
	if id, err := regular(ch.path, info); err != nil {
		return 0, err
	} else if id != ch.id {
		return 0, fmt.Errorf("%s is another file than the approval saw, so nothing was written", ch.path)
	}
	now, err := io.ReadAll(io.LimitReader(f, int64(len(ch.old))+1))
	if err != nil {
		return 0, fmt.Errorf("%s: %v", ch.path, unwrapPath(err))
	}
	if !bytes.Equal(now, ch.old) {
		return 0, fmt.Errorf("%s changed after the approval, so nothing was written", ch.path)
	}
	return info.Mode().Perm(), nil
}

// writeTemp writes the change's new content, synced, to a new temporary
// file beside its file (".<name>.agentd-<random>.tmp") and returns its path.
func (s *Source) writeTemp(ch *change, perm fs.FileMode) (string, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(path.Dir(ch.path), "."+path.Base(ch.path)+".agentd-"+hex.EncodeToString(rnd[:])+".tmp")
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", fmt.Errorf("%s: %v", ch.path, unwrapPath(err))
	}
	_, err = f.Write(ch.new)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = s.root.Remove(tmp)
		return "", fmt.Errorf("%s: %v", ch.path, unwrapPath(err))
	}
	return tmp, nil
}

// syncDir makes the rename of a file in p's folder durable (best effort:
// the file is already in place).
func (s *Source) syncDir(p string) {
	if d, err := s.root.Open(path.Dir(p)); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// writeInPlace writes the change's new content through the descriptor it
// checks the file with (a file reached through a symbolic link).
func (s *Source) writeInPlace(ch *change) error {
	f, err := s.root.OpenFile(ch.path, os.O_RDWR|nonBlock, 0)
	if err != nil {
		return outside(ch.path, err)
	}
	defer f.Close()
	if _, err := checkFile(f, ch); err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("%s: %v", ch.path, unwrapPath(err))
	}
	if _, err := f.WriteAt(ch.new, 0); err != nil {
		return fmt.Errorf("%s: %v", ch.path, unwrapPath(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s: %v", ch.path, unwrapPath(err))
	}
	return nil
}

// countLines counts the added and removed lines of a unified diff.
func countLines(diff string) (added, removed int) {
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
		case strings.HasPrefix(l, "+"):
			added++
		case strings.HasPrefix(l, "-"):
			removed++
		}
	}
	return added, removed
}
