package loop_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/model/script"
	"github.com/agentd-dev/agentd/sqlite"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// startedSpans is a TracerProvider that records the name and the start
// attributes of every span started (loop may not import the SDK).
type startedSpans struct {
	embedded.TracerProvider
	mu    sync.Mutex
	spans map[string][]attribute.KeyValue
}

func (s *startedSpans) Tracer(string, ...trace.TracerOption) trace.Tracer { return spanTracer{s: s} }

// spanTracer is the Tracer of startedSpans.
type spanTracer struct {
	embedded.Tracer
	s *startedSpans
}

func (t spanTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	t.s.mu.Lock()
	cfg := trace.NewSpanStartConfig(opts...)
	t.s.spans[name] = cfg.Attributes()
	t.s.mu.Unlock()
	return noop.NewTracerProvider().Tracer("").Start(ctx, name, opts...)
}

// TestChatSpanNamesTheModel: a model step's span names the model that
// answered it (gen_ai.request.model and the span name) when the agent
// does not: the script model's "script", as a provider's model id.
func TestChatSpanNamesTheModel(t *testing.T) {
	m, err := script.New(json.RawMessage(`{"provider":"script","script":{"rules":[{"when":{"user":".*"},"reply":{"text":"hi"}}]}}`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	tp := &startedSpans{spans: map[string][]attribute.KeyValue{}}
	rec := newRecorder()
	e := loop.New(st, rec, &loop.Agent{Name: "a", Model: m, MaxTurns: 2, ApprovalTimeout: time.Minute},
		loop.Options{Clock: &fakeClock{now: time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)}, ExpireEvery: -1, Tracer: tp})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(); st.Close() })
	p := agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}
	conv, err := e.CreateConversation(context.Background(), p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Send(context.Background(), p, conv.ID, "hello"); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, agentd.EventRunFinished, 1)
	e.Close()
	tp.mu.Lock()
	defer tp.mu.Unlock()
	attrs, ok := tp.spans["chat script"]
	if !ok {
		t.Fatalf("no span \"chat script\": %v", tp.spans)
	}
	for _, a := range attrs {
		if a.Key == "gen_ai.request.model" && a.Value.AsString() == "script" {
			return
		}
	}
	t.Fatalf("the chat span's attributes %v: no gen_ai.request.model script", attrs)
}
