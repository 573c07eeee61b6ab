// Package web is agentd's browser side (the web chat): the page served at
// GET / and the ES module GET /agentd.js, which defines the custom
// elements <agentd-chat>, <agentd-confirmation> and <agentd-approvals>
// for agentd's own page and for any other site that embeds them. The files
// are plain HTML, CSS and JavaScript embedded in the binary: there is no
// build step. docs/web.md describes the elements.
//
// web knows nothing of the API's Go types: the page speaks the HTTP API
// like any other client. It imports no other agentd package.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"time"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy is the page's policy: its own scripts, styles and
// API only; no inline script or style, no plugins, no framing.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// Paths are the URL paths the handler serves, each from the file of the
// same name ("/" is index.html).
var Paths = []string{"/", "/agentd.js", "/app.js", "/agentd.css", "/page.css"}

// file is one embedded asset, ready to serve.
type file struct {
	name string
	body []byte
	etag string
	ctyp string
}

var types = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

var files = load()

func load() map[string]file {
	out := map[string]file{}
	for _, p := range Paths {
		name := p[1:]
		if p == "/" {
			name = "index.html"
		}
		b, err := fs.ReadFile(assets, "assets/"+name)
		if err != nil {
			panic("web: missing asset " + name) // a build without its files
		}
		sum := sha256.Sum256(b)
		out[p] = file{name: name, body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctyp: types[path.Ext(name)]}
	}
	return out
}

// ContentType is the Content-Type the handler serves urlPath, one of
// Paths, with; "" for another path.
func ContentType(urlPath string) string { return files[urlPath].ctyp }

// Asset returns the content of one of Paths (for tests and for sites that
// serve a copy of the module themselves).
func Asset(urlPath string) ([]byte, bool) {
	f, ok := files[urlPath]
	return f.body, ok
}

// Handler serves Paths (GET and HEAD) with their content type, an ETag,
// "X-Content-Type-Options: nosniff", and the Content-Security-Policy;
// other paths are 404.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.ctyp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(f.body))
	})
}
