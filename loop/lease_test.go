package loop_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd"
	"github.com/agentd-dev/agentd/internal/pgtest"
	"github.com/agentd-dev/agentd/loop"
	"github.com/agentd-dev/agentd/postgres"
)

// gatedModel is a model whose calls the test counts and answers: each call
// announces itself on entered (with its context) and waits for a reply on
// reply, or for its context to end.
type gatedModel struct {
	mu      sync.Mutex
	calls   int
	entered chan context.Context
	reply   chan agentd.ModelResponse
}

func newGatedModel() *gatedModel {
	return &gatedModel{entered: make(chan context.Context, 4), reply: make(chan agentd.ModelResponse)}
}

func (m *gatedModel) Generate(ctx context.Context, _ agentd.ModelRequest, _ func(string)) (*agentd.ModelResponse, error) {
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	m.entered <- ctx
	select {
	case r := <-m.reply:
		return &r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *gatedModel) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

// leaseFixture is one replica's engine, with leases, on a PostgreSQL
// database of its own; its clock stands still, so its leases expire only
// when a test says another replica's clock is past them.
type leaseFixture struct {
	store  *postgres.DB
	engine *loop.Engine
	model  *gatedModel
	clock  *fakeClock
	p      agentd.Principal
}

func newLeaseFixture(t *testing.T, lease time.Duration) *leaseFixture {
	t.Helper()
	st, err := postgres.Open(context.Background(), pgtest.NewDatabase(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	f := &leaseFixture{store: st, model: newGatedModel(), clock: &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)},
		p: agentd.Principal{TenantID: "t1", ProjectID: "p1", Role: agentd.RoleClient, KeyID: "k1"}}
	f.engine = loop.New(st, newRecorder(), &loop.Agent{Name: "a", Model: f.model, MaxTurns: 5},
		loop.Options{Clock: f.clock, ExpireEvery: -1, Lease: lease, Owner: "replica-a"})
	if err := f.engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.engine.Close(); st.Close() })
	return f
}

// send starts a run and waits for its first model call.
func (f *leaseFixture) send(t *testing.T) (runID string, modelCtx context.Context) {
	t.Helper()
	conv, err := f.engine.CreateConversation(context.Background(), f.p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	run, err := f.engine.Send(context.Background(), f.p, conv.ID, "go")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case modelCtx = <-f.model.entered:
	case <-time.After(30 * time.Second): // a failure deadline, not a measure
		t.Fatal("no model call")
	}
	return run.ID, modelCtx
}

// steal takes the run's lease as another replica whose clock is at, past
// replica-a's lease.
func (f *leaseFixture) steal(t *testing.T, runID string, at time.Time) {
	t.Helper()
	ok, err := f.store.LeaseRun(context.Background(), runID, "replica-b", at, at.Add(24*time.Hour))
	if err != nil || !ok {
		t.Fatalf("replica-b's lease of the expired run: %v, %v", ok, err)
	}
}

// waitNoDriver waits until the engine has no driver, failing as soon as
// the model is called more than calls times.
func (f *leaseFixture) waitNoDriver(t *testing.T, calls int) {
	t.Helper()
	waitFor(t, "without a driver", func() bool {
		if n := f.model.count(); n > calls {
			t.Fatalf("%d model calls after the lease was lost, want %d", n, calls)
		}
		return f.engine.Drivers() == 0
	})
}

// A replica whose lease of a run another replica took (it had expired)
// stops driving the run: the renewal that finds the lease gone cancels the
// driver's model call in flight, and the replica calls the model for that
// run no more (docs/scale-out.md).
func TestLostLeaseCancelsTheModelCallInFlight(t *testing.T) {
	const lease = 300 * time.Millisecond // renewed every 100ms of real time
	f := newLeaseFixture(t, lease)
	runID, modelCtx := f.send(t)
	f.steal(t, runID, f.clock.Now().Add(lease))
	select {
	case <-modelCtx.Done():
	case <-time.After(30 * time.Second): // a failure deadline, not a measure
		t.Fatal("the model call of a run whose lease was lost was not cancelled")
	}
	f.waitNoDriver(t, 1)
	f.engine.Close()
	if n := f.model.count(); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
}

// A driver that finds, between two steps, that another replica holds its
// run's lease exits before it calls the model again.
func TestLostLeaseStopsTheDriverBetweenSteps(t *testing.T) {
	const lease = time.Hour // no renewal during the test
	f := newLeaseFixture(t, lease)
	runID, _ := f.send(t)
	f.steal(t, runID, f.clock.Now().Add(lease))
	// A step whose one call is refused (no such tool): resolved at once,
	// so the run would go on to a second model call.
	f.model.reply <- agentd.ModelResponse{ToolCalls: []agentd.ModelToolCall{{Name: "nope", Arguments: []byte(`{}`)}}}
	f.waitNoDriver(t, 1)
	f.engine.Close()
	if n := f.model.count(); n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	run, err := f.store.Run(context.Background(), runID)
	if err != nil || run.Step != 1 || !run.Status.Active() {
		t.Fatalf("run = %+v, %v; want active at step 1 for replica-b to drive", run, err)
	}
}
