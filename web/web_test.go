package web

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// Every file is served with its type and the security headers; a repeat
// with the ETag is 304; other paths are 404.
func TestHandler(t *testing.T) {
	h := Handler()
	for p, typ := range map[string]string{"/": "text/html", "/agentd.js": "text/javascript", "/app.js": "text/javascript", "/agentd.css": "text/css", "/page.css": "text/css"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), typ) {
			t.Errorf("GET %s: %d %q", p, rec.Code, rec.Header().Get("Content-Type"))
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("Content-Security-Policy") != ContentSecurityPolicy {
			t.Errorf("GET %s: headers %v", p, rec.Header())
		}
		again := httptest.NewRequest(http.MethodGet, p, nil)
		again.Header.Set("If-None-Match", rec.Header().Get("ETag"))
		rec2 := httptest.NewRecorder()
		h.ServeHTTP(rec2, again)
		if rec2.Code != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", p, rec2.Code)
		}
	}
	for _, p := range []string{"/index.html", "/assets/agentd.js", "/x", "/agentd.js/"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, rec.Code)
		}
	}
	for _, d := range []string{"script-src 'self'", "connect-src 'self'", "default-src 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(ContentSecurityPolicy, d) {
			t.Errorf("the policy lacks %s", d)
		}
	}
}

// The page has no inline script, style or handler (the policy forbids
// them), and the script never turns text into HTML: every model, tool and
// argument string reaches the page through text nodes.
func TestNoHTMLFromData(t *testing.T) {
	page, _ := Asset("/")
	for _, m := range regexp.MustCompile(`(?is)<script([^>]*)>(.*?)</script>`).FindAllStringSubmatch(string(page), -1) {
		if !strings.Contains(m[1], "src=") || strings.TrimSpace(m[2]) != "" {
			t.Errorf("index.html has an inline script: %q", m[0])
		}
	}
	if m := regexp.MustCompile(`(?i)\son[a-z]+=|\sstyle=|<style`).FindString(string(page)); m != "" {
		t.Errorf("index.html has %q", m)
	}
	for _, p := range []string{"/agentd.js", "/app.js"} {
		js, _ := Asset(p)
		for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment", "eval(", "new Function"} {
			if bytes.Contains(js, []byte(sink)) {
				t.Errorf("%s uses %s", p, sink)
			}
		}
	}
}

// pageWeightLimit is the target for everything the page loads (HTML, JS,
// CSS), gzipped (docs/performance.md).
const pageWeightLimit = 40 << 10

func TestPageWeight(t *testing.T) {
	var raw, zipped int
	for _, p := range Paths {
		b, _ := Asset(p)
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		_, _ = w.Write(b)
		_ = w.Close()
		raw += len(b)
		zipped += z.Len()
		t.Logf("%-12s %6d bytes, %6d gzipped", p, len(b), z.Len())
	}
	t.Logf("page weight: %d bytes, %d gzipped (limit %d)", raw, zipped, pageWeightLimit)
	if zipped > pageWeightLimit {
		t.Fatalf("the page weighs %d bytes gzipped, over the %d target", zipped, pageWeightLimit)
	}
}
