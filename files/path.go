package files

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/agentd-dev/agentd/confirm"
)

// maxPathBytes bounds a path argument.
const maxPathBytes = 1024

// CleanPath checks a model-given path and returns it cleaned, relative to
// the workspace ("." for the workspace itself when empty is allowed).
// Refused: absolute paths, any ".." element, NUL bytes, paths over 1 KiB,
// and what confirm.CheckShown refuses (invalid UTF-8, control characters,
// line separators, bidirectional formatting characters), which could make
// the card's path and diff read as something they are not.
// It is the lexical half of the rule; os.Root refuses symbolic links that
// lead outside when the path is used (Resolve).
func CleanPath(p string, emptyOK bool) (string, error) {
	switch {
	case p == "" && emptyOK:
		return ".", nil
	case p == "":
		return "", errors.New(`"path" is required`)
	case len(p) > maxPathBytes:
		return "", fmt.Errorf("path is longer than %d bytes", maxPathBytes)
	case strings.ContainsRune(p, 0):
		return "", errors.New("path contains a NUL byte")
	}
	if err := confirm.CheckShown(p); err != nil {
		return "", fmt.Errorf("path %q refused: %v, which could make the card show something other than what would change", p, err)
	}
	switch {
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) || filepath.IsAbs(p):
		return "", fmt.Errorf("absolute path %q refused: paths are relative to the workspace", p)
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return "", fmt.Errorf("path %q refused: \"..\" may not leave the workspace", p)
		}
	}
	clean := path.Clean(p)
	if !filepath.IsLocal(clean) && clean != "." {
		return "", fmt.Errorf("path %q refused: it does not name a file inside the workspace", p)
	}
	return clean, nil
}

// outside turns an os.Root error into the refusal a model reads: a path
// that leads outside the workspace (a symbolic link to elsewhere); other
// errors are returned as they are.
func outside(p string, err error) error {
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if strings.Contains(err.Error(), "path escapes from parent") {
		return fmt.Errorf("path %q refused: it leads outside the workspace (a symbolic link)", p)
	}
	return fmt.Errorf("path %q: %v", p, unwrapPath(err))
}

// unwrapPath drops the *fs.PathError wrapping, whose path is the root's
// internal name.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
