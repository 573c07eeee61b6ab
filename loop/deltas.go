package loop

import (
	"context"
	"sync"

	"github.com/agentd-dev/agentd"
)

// maxDeltaAppend bounds the text deltas of one AppendEvents.
const maxDeltaAppend = 128

// deltaWriter appends a model step's text deltas to the conversation's log
// as they arrive without making the model wait for each commit (SPEC
// §8.1): a delta that arrives while the previous ones are being committed
// waits in a queue, and the queue goes into the next commit whole. Each
// delta stays its own text_delta event, drafted (and timestamped) when it
// arrives, in arrival order; only the commits are shared. A stream whose
// deltas come slower than a commit takes gets one commit per delta, as
// before; a fast one, or one on a busy store, gets fewer.
//
// add is called by the model's callback and flush after Generate returns,
// on the same goroutine; flush returns once every delta added is committed
// and published (or failed), so the step's own events come after them.
type deltaWriter struct {
	e                *core
	ctx              context.Context
	conv, run, msgID string

	mu      sync.Mutex
	queue   []agentd.EventDraft
	writing bool // a drain goroutine is running
	wg      sync.WaitGroup
}

func (e *runner) newDeltaWriter(ctx context.Context, run *agentd.Run, msgID string) *deltaWriter {
	return &deltaWriter{e: e.core, ctx: ctx, conv: run.ConversationID, run: run.ID, msgID: msgID}
}

// add queues delta and starts a drain when none is running.
func (w *deltaWriter) add(delta string) {
	if delta == "" {
		return
	}
	d := w.e.event(w.conv, &agentd.TextDeltaPayload{RunID: w.run, MessageID: w.msgID, Delta: delta})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, d)
	if !w.writing {
		w.writing = true
		w.wg.Add(1)
		go w.drain()
	}
}

// drain commits and publishes the queue, batch by batch, until it is empty.
func (w *deltaWriter) drain() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		n := min(len(w.queue), maxDeltaAppend)
		if n == 0 {
			w.writing = false
			w.mu.Unlock()
			return
		}
		batch := w.queue[:n:n]
		w.queue = w.queue[n:]
		w.mu.Unlock()
		err := w.e.commit(w.conv, func() ([]agentd.Event, error) {
			return w.e.store.AppendEvents(w.ctx, batch)
		})
		if err != nil && w.ctx.Err() == nil {
			w.e.log.Error().Err(err).Int("deltas", n).Msg("append text delta")
		}
	}
}

// flush waits until every delta added so far is committed or failed.
func (w *deltaWriter) flush() { w.wg.Wait() }
