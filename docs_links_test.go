package agentd

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Every relative link of the README and of docs/ points at a file of the
// repository (never outside it), and every #anchor at a heading of the
// page it names: moving a section between pages cannot leave a dead link.
func TestDocsLinks(t *testing.T) {
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "README.md")
	root, _ := filepath.Abs(".")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(stripCode(string(text)), -1) {
			target := m[1]
			if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			abs, _ := filepath.Abs(path)
			if abs != root && !strings.HasPrefix(abs, root+string(filepath.Separator)) {
				t.Errorf("%s: link %q points outside the repository", page, target)
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %q: no such file", page, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !hasAnchor(t, path, anchor) {
				t.Errorf("%s: link %q: %s has no heading with that anchor", page, target, path)
			}
		}
	}
}

// stripCode drops fenced code blocks and inline code, where "](" is not a
// link.
func stripCode(s string) string {
	s = regexp.MustCompile("(?s)```.*?```").ReplaceAllString(s, "")
	return regexp.MustCompile("`[^`\n]*`").ReplaceAllString(s, "")
}

// hasAnchor reports whether the markdown file at path has a heading whose
// GitHub anchor is anchor (lower case, punctuation dropped, spaces as
// hyphens, "-1", "-2"… for repeats).
func hasAnchor(t *testing.T, path, anchor string) bool {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(text), ""), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		slug := headingSlug(strings.TrimLeft(line, "# "))
		n := seen[slug]
		seen[slug]++
		if n > 0 {
			slug += "-" + strconv.Itoa(n)
		}
		if slug == anchor {
			return true
		}
	}
	return false
}

func headingSlug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
