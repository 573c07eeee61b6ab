package bench

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/sse"
)

// These quick checks of the benchmark helpers, with TestParkedScaleSmoke,
// are all that a plain `go test ./bench/` runs.

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 100}, {90, 180}, {99, 198}, {100, 200}, {0.1, 1}} {
		if got := percentile(ds, c.p); got != c.want {
			t.Errorf("p%v = %d, want %d", c.p, got, c.want)
		}
	}
	s := summarize([]time.Duration{3, 1, 2})
	if s.p50 != 2 || s.max != 3 || s.mean != 2 || s.n != 3 {
		t.Errorf("summarize = %+v", s)
	}
	if percentile(nil, 50) != 0 {
		t.Error("percentile of nothing")
	}
}

func TestSSEReader(t *testing.T) {
	var buf bytes.Buffer
	long := strings.Repeat("x", 20<<10) // longer than the reader's buffer
	for i, e := range []agentd.Event{
		{Seq: 1, Type: "run_started", Data: []byte(`{"a":1}`)},
		{Seq: 2, Type: "message", Data: []byte(`{"content":"` + long + `"}`)},
		{Seq: 3, Type: "text", Data: []byte("two\nlines")},
	} {
		if i == 1 {
			if err := sse.WriteComment(&buf, "ping"); err != nil {
				t.Fatal(err)
			}
		}
		if err := sse.WriteEvent(&buf, e); err != nil {
			t.Fatal(err)
		}
	}
	r := newSSEReader(&buf)
	for _, want := range []struct {
		id   int64
		typ  string
		size int
	}{{1, "run_started", 7}, {2, "message", len(long) + 14}, {3, "text", 8}} {
		id, typ, n, err := r.next()
		if err != nil || id != want.id || typ != want.typ || n != want.size {
			t.Fatalf("next = %d %q %d %v, want %d %q %d", id, typ, n, err, want.id, want.typ, want.size)
		}
	}
	if _, _, _, err := r.next(); err != io.EOF {
		t.Fatalf("after the last event: %v", err)
	}
}
