package origin

import (
	"net/url"
	"testing"
)

func TestSame(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/other?q=1", true},
		{"https://Example.com/a", "https://example.com:443/b", true},
		{"http://example.com/", "http://example.com:80/", true},
		{"http://127.0.0.1:8080/mcp", "http://127.0.0.1:8081/mcp", false},
		{"https://example.com/mcp", "http://example.com/mcp", false},
		{"https://example.com/mcp", "https://evil.example/mcp", false},
		{"https://example.com/mcp", "https://example.com.evil/mcp", false},
		{"ftp://example.com/", "ftp://example.com/", false},
		{"https://example.com/", "https://user@example.com/", true}, // userinfo is not part of the origin
	} {
		a, err := url.Parse(tc.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := url.Parse(tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := Same(a, b); got != tc.same {
			t.Errorf("Same(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
