package provider

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A provider's client never follows a redirect to another origin, so a key
// in x-api-key (which Go does not strip on redirects) stays home; a
// redirect on the same origin is followed.
func TestNewHTTPClientRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	home := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		case "/here":
			http.Redirect(w, r, "/ok", http.StatusTemporaryRedirect)
		case "/ok":
			if r.Header.Get("x-api-key") != "k" {
				t.Errorf("same-origin redirect lost the key header")
			}
		}
	}))
	defer home.Close()
	c := NewHTTPClient()
	req, _ := http.NewRequest(http.MethodPost, home.URL+"/away", nil)
	req.Header.Set("x-api-key", "k")
	if _, err := c.Do(req); err == nil {
		t.Fatal("a redirect to another origin was followed")
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the other origin got %d requests", n)
	}
	req, _ = http.NewRequest(http.MethodPost, home.URL+"/here", nil)
	req.Header.Set("x-api-key", "k")
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("same-origin redirect: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestRetryAfterRejectsNaN(t *testing.T) {
	for _, v := range []string{"NaN", "nan", "-1", "Inf", "1e99"} {
		if d, ok := RetryAfter(http.Header{"Retry-After": {v}}, time.Now()); ok {
			t.Errorf("Retry-After %q = %v, want no usable value", v, d)
		}
		if d, ok := RetryAfter(http.Header{"Retry-After-Ms": {v}}, time.Now()); ok {
			t.Errorf("retry-after-ms %q = %v, want no usable value", v, d)
		}
	}
}
