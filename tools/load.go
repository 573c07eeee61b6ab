package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentd-dev/agentd/internal/jsonconf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

var (
	namePattern    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// toolFile is tool.json as written. Nested objects and values with several
// shapes stay raw and are decoded field by field.
type toolFile struct {
	Name        *string         `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Exposure    json.RawMessage `json:"exposure"`
	LLMCallable *bool           `json:"llm_callable"`
	Confirm     json.RawMessage `json:"confirm"`
	Command     []string        `json:"command"`
	Env         []string        `json:"env"`
	TimeoutMS   *int64          `json:"timeout_ms"`
	Idempotent  bool            `json:"idempotent"`
}

type exposureFile struct {
	Kind   *string `json:"kind"`
	Prompt string  `json:"prompt"`
}

// LoadDir loads every <toolsDir>/<name>/tool.json. A missing toolsDir is
// no tools and no error. Errors name the file (relative to toolsDir's
// parent, e.g. tools/refund/tool.json) and the field. Warnings report
// what was skipped: tools with confirm "never", folders without tool.json,
// commands not found in PATH.
func LoadDir(toolsDir string) (map[string]*Tool, []string, error) {
	loaded := map[string]*Tool{}
	entries, err := os.ReadDir(toolsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return loaded, nil, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("read tools folder: %w", err)
	}
	var warnings []string
	base := filepath.Base(toolsDir)
	for _, e := range entries {
		name := e.Name()
		dir := filepath.Join(toolsDir, name)
		if strings.HasPrefix(name, ".") {
			continue
		}
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			continue // a stray file, e.g. a README
		}
		display := filepath.ToSlash(filepath.Join(base, name, "tool.json"))
		data, err := os.ReadFile(filepath.Join(dir, "tool.json"))
		if errors.Is(err, fs.ErrNotExist) {
			warnings = append(warnings, fmt.Sprintf("%s/%s: no tool.json, folder ignored", base, name))
			continue
		} else if err != nil {
			return nil, warnings, fmt.Errorf("%s: %w", display, err)
		}
		absDir, err := filepath.Abs(dir)
		if err != nil {
			return nil, warnings, fmt.Errorf("%s: %w", display, err)
		}
		tool, warning, err := parseTool(data, name, absDir)
		if err != nil {
			return nil, warnings, fmt.Errorf("%s: %w", display, err)
		}
		if warning != "" {
			warnings = append(warnings, display+": "+warning)
		}
		if tool != nil {
			loaded[tool.Name] = tool
		}
	}
	return loaded, warnings, nil
}

// parseTool checks one tool.json. It returns a nil tool and a warning for
// a tool that is not registered (confirm "never").
func parseTool(data []byte, folder, dir string) (*Tool, string, error) {
	var f toolFile
	if err := jsonconf.DecodeStrict(data, &f, ""); err != nil {
		return nil, "", err
	}
	t := &Tool{Description: f.Description, LLMCallable: true, Timeout: defaultTimeout, Idempotent: f.Idempotent, Dir: dir}
	var warning string

	switch {
	case f.Name == nil:
		return nil, "", jsonconf.FieldErr("name", "required (the folder name, %q)", folder)
	case !namePattern.MatchString(*f.Name):
		return nil, "", jsonconf.FieldErr("name", "must be 1 to 64 letters, digits, '_' or '-', got %q", *f.Name)
	case *f.Name != folder:
		return nil, "", jsonconf.FieldErr("name", "must equal the folder name %q, got %q", folder, *f.Name)
	}
	t.Name = *f.Name

	t.Parameters = defaultParameters
	if !jsonconf.IsNull(f.Parameters) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, f.Parameters); err != nil {
			return nil, "", jsonconf.FieldErr("parameters", "%v", err)
		}
		var probe struct {
			Type any `json:"type"`
		}
		if err := json.Unmarshal(buf.Bytes(), &probe); err != nil {
			return nil, "", jsonconf.FieldErr("parameters", "must be a JSON Schema object")
		}
		if probe.Type != nil && probe.Type != "object" {
			return nil, "", jsonconf.FieldErr("parameters", `"type" must be "object": arguments are always a JSON object`)
		}
		t.Parameters = buf.Bytes()
	}
	sch, err := compileSchema(t.Name, t.Parameters)
	if err != nil {
		return nil, "", jsonconf.FieldErr("parameters", "%v", err)
	}
	t.schema = sch

	t.Exposure = Exposure{Kind: ExposureOpen}
	if !jsonconf.IsNull(f.Exposure) {
		var e exposureFile
		if err := jsonconf.DecodeStrict(f.Exposure, &e, "exposure"); err != nil {
			return nil, "", err
		}
		if e.Kind != nil {
			switch *e.Kind {
			case ExposureOpen, ExposureRequiresConfirmation, ExposureOperatorGated:
				t.Exposure.Kind = *e.Kind
			default:
				return nil, "", jsonconf.FieldErr("exposure.kind", "must be one of %s, %s, %s", ExposureOpen, ExposureRequiresConfirmation, ExposureOperatorGated)
			}
		}
		t.Exposure.Prompt = strings.TrimSpace(e.Prompt)
	}

	if f.LLMCallable != nil {
		t.LLMCallable = *f.LLMCallable
	}

	if !jsonconf.IsNull(f.Confirm) {
		var b bool
		var s string
		switch {
		case json.Unmarshal(f.Confirm, &b) == nil:
			if b {
				t.Confirm = "true"
			}
		case json.Unmarshal(f.Confirm, &s) == nil && s == "review":
			t.Confirm = "review"
		case json.Unmarshal(f.Confirm, &s) == nil && s == "never":
			return nil, `confirm is "never": the tool is not registered`, nil
		default:
			return nil, "", jsonconf.FieldErr("confirm", `must be false, true, "review" or "never", got %s`, bytes.TrimSpace(f.Confirm))
		}
	}

	if len(f.Command) == 0 || f.Command[0] == "" {
		return nil, "", jsonconf.FieldErr("command", `required: the program and its arguments, e.g. ["./run.sh"]`)
	}
	t.Command = f.Command
	if warning, err = checkProgram(f.Command[0], dir); err != nil {
		return nil, "", err
	}

	seen := map[string]bool{}
	for i, name := range f.Env {
		field := fmt.Sprintf("env[%d]", i)
		if !envNamePattern.MatchString(name) {
			return nil, "", jsonconf.FieldErr(field, "not a valid environment variable name: %q", name)
		}
		if seen[name] {
			return nil, "", jsonconf.FieldErr(field, "%q is listed twice", name)
		}
		seen[name] = true
	}
	t.Env = f.Env

	if f.TimeoutMS != nil {
		ms := *f.TimeoutMS
		if ms <= 0 || time.Duration(ms)*time.Millisecond > maxTimeout {
			return nil, "", jsonconf.FieldErr("timeout_ms", "must be between 1 and %d (%s), got %d", maxTimeout.Milliseconds(), maxTimeout, ms)
		}
		t.Timeout = time.Duration(ms) * time.Millisecond
	}
	return t, warning, nil
}

// checkProgram checks the command's program: a path (relative ones resolve
// against the tool folder) must be an executable file; a bare name not
// found in PATH is only a warning, since it may be installed later.
func checkProgram(prog, dir string) (warning string, err error) {
	if !strings.Contains(prog, "/") {
		if _, err := exec.LookPath(prog); err != nil {
			return fmt.Sprintf("command %q not found in PATH", prog), nil
		}
		return "", nil
	}
	path := prog
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return "", jsonconf.FieldErr("command", "program %q not found", prog)
	case info.IsDir():
		return "", jsonconf.FieldErr("command", "program %q is a directory", prog)
	case info.Mode().Perm()&0o111 == 0:
		return "", jsonconf.FieldErr("command", "program %q is not executable (chmod +x it)", prog)
	}
	return "", nil
}
