// Package files is the workspace file tools of an agent (SPEC §4.4) as one
// tool source (toolset.Source, server_id "files"): list_files and
// read_file (auto), write_file, edit_file and delete_file (confirm, with
// the card's unified diff of exactly what would change).
//
// Every path is resolved inside the workspace with os.Root: absolute
// paths and ".." are refused before anything is opened (CleanPath), and a
// symbolic link that leads outside fails when the path is used — at
// classification, so the call is refused (tier never) with the reason, and
// again when the call runs, so no race between check and use can reach a
// file outside. A write, edit or delete is bound to the digest of the
// file's identity and content when its card was made: if the file changed
// or another file took its name before the call runs, the loop parks it
// again with a fresh diff (toolset.Preparation) and Execute refuses to write
// over the change (docs/files.md). A file with more than one hard link is
// left alone: another of its names may be outside the workspace.
package files

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/confirm"
	"github.com/agentd-dev/agentd/toolset"
	udiff "github.com/aymanbagabas/go-udiff"
)

// ServerID is the server_id of the file tools.
const ServerID = "files"

// Defaults of Options.
const (
	DefaultMaxReadBytes  = 1 << 20
	DefaultMaxWriteBytes = 1 << 20
	// maxEntries bounds a list_files answer.
	maxEntries = 1000
)

// The tool names.
const (
	ListFiles  = "list_files"
	ReadFile   = "read_file"
	WriteFile  = "write_file"
	EditFile   = "edit_file"
	DeleteFile = "delete_file"
)

// absent is the state digest of a file that does not exist.
const absent = "absent"

// Options bound what the tools read and write; zero values mean the
// defaults.
type Options struct {
	MaxReadBytes  int64
	MaxWriteBytes int64
}

// Source is the file tools over one workspace folder. It is safe for
// concurrent use; Close releases the workspace.
type Source struct {
	dir  string
	root *os.Root
	opts Options
	defs []toolset.Tool
}

// Open returns the file tools over the folder dir, which must exist.
func Open(dir string, opts Options) (*Source, error) {
	if opts.MaxReadBytes <= 0 {
		opts.MaxReadBytes = DefaultMaxReadBytes
	}
	if opts.MaxWriteBytes <= 0 {
		opts.MaxWriteBytes = DefaultMaxWriteBytes
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	s := &Source{dir: dir, root: root, opts: opts}
	s.defs = s.tools()
	return s, nil
}

// Close releases the workspace folder.
func (s *Source) Close() error { return s.root.Close() }

// Dir is the workspace folder.
func (s *Source) Dir() string { return s.dir }

// ID is ServerID.
func (s *Source) ID() string { return ServerID }

// Tools lists the five tools, sorted by name.
func (s *Source) Tools() []toolset.Tool { return s.defs }

// args are every tool's arguments; each tool uses its own.
type args struct {
	Path    string  `json:"path"`
	Content *string `json:"content,omitempty"`
	OldText *string `json:"old_text,omitempty"`
	NewText *string `json:"new_text,omitempty"`
}

func (s *Source) tools() []toolset.Tool {
	pathProp := `"path":{"type":"string","description":"a path relative to the workspace"}`
	specs := []struct {
		name, desc, params string
		writes             bool
	}{
		{DeleteFile, "Delete a file of the workspace (asks the user first).", `{"type":"object","properties":{` + pathProp + `},"required":["path"],"additionalProperties":false}`, true},
		{EditFile, "Replace the one occurrence of old_text in a file of the workspace with new_text (asks the user first).",
			`{"type":"object","properties":{` + pathProp + `,"old_text":{"type":"string"},"new_text":{"type":"string"}},"required":["path","old_text","new_text"],"additionalProperties":false}`, true},
		{ListFiles, "List a folder of the workspace (the workspace itself without a path).", `{"type":"object","properties":{` + pathProp + `},"additionalProperties":false}`, false},
		{ReadFile, "Read a text file of the workspace.", `{"type":"object","properties":{` + pathProp + `},"required":["path"],"additionalProperties":false}`, false},
		{WriteFile, "Create or replace a file of the workspace with content (asks the user first).",
			`{"type":"object","properties":{` + pathProp + `,"content":{"type":"string"}},"required":["path","content"],"additionalProperties":false}`, true},
	}
	defs := make([]toolset.Tool, 0, len(specs))
	for _, sp := range specs {
		name := sp.name
		exposure := confirm.ExposureOpen
		if sp.writes {
			exposure = confirm.ExposureRequiresConfirmation
		}
		defs = append(defs, toolset.Tool{
			Spec: agentd.ToolSpec{Name: name, Description: sp.desc, Parameters: json.RawMessage(sp.params)},
			Confirm: &confirm.Tool{Name: name, ServerID: ServerID, Exposure: exposure,
				Validate: func(raw json.RawMessage) (json.RawMessage, error) { return s.validate(name, raw) }},
			LLMCallable: true,
			// write_file is atomic (write) and a call that already wrote
			// answers so (apply): recovery may run it again.
			Idempotent: !sp.writes || name == WriteFile,
			Origin:     "the workspace file tools",
			Prepare: func(ctx context.Context, raw json.RawMessage) (toolset.Preparation, error) {
				return s.prepare(name, raw)
			},
		})
	}
	sort.Slice(defs, func(i, j int) bool { return defs[i].Spec.Name < defs[j].Spec.Name })
	return defs
}

// validate checks a call's arguments without touching the workspace and
// returns the effective arguments (the path cleaned).
func (s *Source) validate(tool string, raw json.RawMessage) (json.RawMessage, error) {
	var a args
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("invalid arguments for tool %q: %v", tool, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("invalid arguments for tool %q: more than one JSON value", tool)
	}
	p, err := CleanPath(a.Path, tool == ListFiles)
	if err != nil {
		return nil, err
	}
	a.Path = p
	switch tool {
	case WriteFile:
		if a.Content == nil {
			return nil, errors.New(`"content" is required`)
		}
		if int64(len(*a.Content)) > s.opts.MaxWriteBytes {
			return nil, fmt.Errorf("content is larger than the %d-byte write limit", s.opts.MaxWriteBytes)
		}
	case EditFile:
		if a.OldText == nil || a.NewText == nil {
			return nil, errors.New(`"old_text" and "new_text" are required`)
		}
		if *a.OldText == "" {
			return nil, errors.New(`"old_text" must not be empty`)
		}
		if int64(len(*a.NewText)) > s.opts.MaxWriteBytes {
			return nil, fmt.Errorf("new_text is larger than the %d-byte write limit", s.opts.MaxWriteBytes)
		}
	}
	if (tool != WriteFile && a.Content != nil) || (tool != EditFile && (a.OldText != nil || a.NewText != nil)) {
		return nil, fmt.Errorf("invalid arguments for tool %q: unexpected field", tool)
	}
	return json.Marshal(a)
}

// change is what a write, edit or delete would do to one file.
type change struct {
	path     string
	old, new []byte
	existed  bool
	remove   bool
	link     string // a deleted symbolic link's target ("" for a file)
	id       string // the identity of the file read (fileID; "" when absent)
	state    string // the digest of id and old (absent when it did not exist)
}

// prepare resolves a call's path inside the workspace and, for a write,
// edit or delete, computes the change: the card's diff and the state
// digest the approval is bound to. Errors refuse the call.
func (s *Source) prepare(tool string, raw json.RawMessage) (toolset.Preparation, error) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return toolset.Preparation{}, err
	}
	switch tool {
	case ListFiles, ReadFile:
		info, err := s.root.Stat(a.Path)
		if err := outside(a.Path, err); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return toolset.Preparation{}, err
		}
		if err == nil && tool == ReadFile && info.Mode().IsRegular() {
			if _, err := regular(a.Path, info); err != nil {
				return toolset.Preparation{}, err
			}
		}
		return toolset.Preparation{}, nil
	}
	ch, err := s.change(tool, a)
	if err != nil {
		return toolset.Preparation{}, err
	}
	return toolset.Preparation{Diff: ch.diff(), State: ch.state}, nil
}

// change computes what a write, edit or delete would do now.
func (s *Source) change(tool string, a args) (*change, error) {
	if tool == DeleteFile {
		if ch, err := s.linkChange(a.Path); ch != nil || err != nil {
			return ch, err
		}
	}
	f, err := s.current(a.Path)
	if err != nil {
		return nil, err
	}
	ch := &change{path: a.Path, state: absent}
	existed := f != nil
	if existed {
		ch.old, ch.existed, ch.id, ch.state = f.content, true, f.id, f.state()
	}
	old := ch.old
	switch tool {
	case WriteFile:
		ch.new = []byte(*a.Content)
	case EditFile:
		if !existed {
			return nil, fmt.Errorf("%s does not exist, so there is nothing to edit", a.Path)
		}
		switch n := strings.Count(string(old), *a.OldText); n {
		case 1:
		case 0:
			return nil, fmt.Errorf("old_text does not occur in %s; it must occur exactly once", a.Path)
		default:
			return nil, fmt.Errorf("old_text occurs %d times in %s; it must occur exactly once", n, a.Path)
		}
		ch.new = []byte(strings.Replace(string(old), *a.OldText, *a.NewText, 1))
		if int64(len(ch.new)) > s.opts.MaxWriteBytes {
			return nil, fmt.Errorf("the edited file would be larger than the %d-byte write limit", s.opts.MaxWriteBytes)
		}
	case DeleteFile:
		if !existed {
			return nil, fmt.Errorf("%s does not exist, so there is nothing to delete", a.Path)
		}
		ch.remove = true
	}
	return ch, nil
}

// linkChange is the delete of a symbolic link that stays inside the
// workspace (nil when p is not a link): the link goes, its target stays.
// As git shows a link, its "content" in the diff is the target's path,
// and the state an approval is bound to is that target: a link pointed
// elsewhere after the card is parked again. A link that leads outside is
// refused, as everywhere.
func (s *Source) linkChange(p string) (*change, error) {
	info, err := s.root.Lstat(p)
	if err != nil || info.Mode()&fs.ModeSymlink == 0 {
		return nil, nil // not a link: the caller reads it as a file
	}
	if _, err := s.root.Stat(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, outside(p, err)
	}
	target, err := s.root.Readlink(p)
	if err != nil {
		return nil, outside(p, err)
	}
	return &change{path: p, old: []byte(target), existed: true, remove: true, link: target,
		state: digest([]byte("symlink\x00" + target))}, nil
}

// file is a workspace file as it was read.
type file struct {
	content []byte
	id      string // its identity: device and inode (fileID)
}

// state is the digest an approval of a change to f is bound to: the
// file's identity and its content, so that another file given its name
// (a symbolic link to another file with equal content, a copy moved over
// it) is a change like an edit.
func (f *file) state() string {
	return digest([]byte("file\x00" + f.id + "\x00" + string(f.content)))
}

// current reads a workspace file; nil when it does not exist. A path whose
// folder does not exist yet is a file that does not exist; a path through
// a link outside the workspace, a folder, anything but a regular file, a
// file with more than one hard link, or a file over the read limit is an
// error.
func (s *Source) current(p string) (*file, error) {
	f, err := s.open(p)
	if errors.Is(err, fs.ErrNotExist) {
		// The file does not exist: its folder must not lead outside either.
		if _, derr := s.root.Stat(path.Dir(p)); derr != nil && !errors.Is(derr, fs.ErrNotExist) {
			return nil, outside(p, derr)
		}
		return nil, nil
	} else if err != nil {
		return nil, outside(p, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, outside(p, err)
	}
	id, err := regular(p, info)
	if err != nil {
		return nil, err
	}
	if info.Size() > s.opts.MaxReadBytes {
		return nil, fmt.Errorf("%s is larger than the %d-byte read limit", p, s.opts.MaxReadBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, s.opts.MaxReadBytes+1))
	if err != nil {
		return nil, outside(p, err)
	}
	if int64(len(b)) > s.opts.MaxReadBytes {
		return nil, fmt.Errorf("%s is larger than the %d-byte read limit", p, s.opts.MaxReadBytes)
	}
	return &file{content: b, id: id}, nil
}

// regular checks that the opened p is a regular file with one link and
// returns its identity. A file with more than one hard link is refused:
// its other names may be outside the workspace, where os.Root cannot see,
// and a write in place would change the file there too.
func regular(p string, info fs.FileInfo) (string, error) {
	if info.IsDir() {
		return "", fmt.Errorf("%s is a folder, not a file", p)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (%s), so the file tools leave it alone", p, kind(info.Mode()))
	}
	id, links := fileID(info)
	if links > 1 {
		return "", fmt.Errorf("%s has %d hard links, so the file tools leave it alone: another name of the same file may be outside the workspace", p, links)
	}
	return id, nil
}

// open opens a workspace path for reading; a named pipe or a device opens
// at once instead of blocking (nonBlock), so that the caller can refuse
// it (current, list): a read of one could wait forever, and with it the
// run's model step.
func (s *Source) open(p string) (*os.File, error) {
	return s.root.OpenFile(p, os.O_RDONLY|nonBlock, 0)
}

// kind names a file mode that is not a regular file or a folder.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// diff is the unified diff of the change, "--- a/<path>" "+++ b/<path>".
func (ch *change) diff() string {
	return Diff(ch.path, string(ch.old), string(ch.new))
}

// Diff is the unified diff that turns old into new, labelled a/<path> and
// b/<path>, with three lines of context; "" when they are equal.
func Diff(p, old, new string) string {
	return udiff.Unified("a/"+p, "b/"+p, old, new)
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// entry is one item of a list_files answer.
type entry struct {
	Name string `json:"name"`
	Type string `json:"type"` // file, folder, symlink or other
	Size int64  `json:"size,omitempty"`
}

// list lists a workspace folder, at most maxEntries entries, sorted.
func (s *Source) list(p string) (json.RawMessage, error) {
	f, err := s.open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist", p)
		}
		return nil, outside(p, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.IsDir() {
		return nil, fmt.Errorf("%s is not a folder", p)
	}
	des, err := f.ReadDir(maxEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %v", p, unwrapPath(err))
	}
	truncated := len(des) > maxEntries
	if truncated {
		des = des[:maxEntries]
	}
	out := make([]entry, 0, len(des))
	for _, d := range des {
		e := entry{Name: d.Name(), Type: "other"}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			e.Type = "symlink"
		case d.IsDir():
			e.Type = "folder"
		case d.Type().IsRegular():
			e.Type = "file"
			if info, err := d.Info(); err == nil {
				e.Size = info.Size()
			}
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return json.Marshal(map[string]any{"path": p, "entries": out, "truncated": truncated})
}
