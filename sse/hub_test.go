package sse

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd"
)

func ev(conv string, seq int64) agentd.Event {
	return agentd.Event{ConversationID: conv, Seq: seq, Type: "message", Data: []byte(`{}`)}
}

func TestHubFansOutByConversation(t *testing.T) {
	checkLeaks(t)
	h := NewHub()
	a1, a2, b := h.Subscribe("a"), h.Subscribe("a"), h.Subscribe("b")
	defer a1.Close()
	defer a2.Close()
	defer b.Close()
	if n := h.Subscribers(); n != 3 {
		t.Fatalf("Subscribers = %d, want 3", n)
	}

	h.Publish(ev("a", 1))
	h.Publish(ev("a", 2))
	for _, s := range []*Subscription{a1, a2} {
		for want := int64(1); want <= 2; want++ {
			if got := (<-s.Events()).Seq; got != want {
				t.Fatalf("got seq %d, want %d", got, want)
			}
		}
	}
	if len(b.Events()) != 0 {
		t.Fatalf("conversation b received %d events of a", len(b.Events()))
	}
	h.Publish(ev("nobody", 1)) // no subscribers: nothing happens
}

// A subscriber that never reads is cut off, and Publish never waits for it:
// the fast subscriber of the same conversation gets every event. Publish and
// the fast read alternate, so a Publish that blocked on the slow subscriber
// would deadlock the test rather than slow it down.
func TestHubCutsOffSlowSubscriberWithoutDelayingOthers(t *testing.T) {
	checkLeaks(t)
	const buffer, n = 4, 100
	h := NewHub(WithBuffer(buffer))
	slow, fast := h.Subscribe("c"), h.Subscribe("c")
	defer slow.Close()
	defer fast.Close()

	for i := int64(1); i <= n; i++ {
		h.Publish(ev("c", i))
		if got := (<-fast.Events()).Seq; got != i {
			t.Fatalf("fast subscriber got seq %d, want %d", got, i)
		}
		if i == buffer {
			select {
			case <-slow.Done():
				t.Fatalf("slow subscriber cut off with only a full buffer")
			default:
			}
		}
	}
	<-slow.Done() // closed when event buffer+1 found the buffer full
	if !errors.Is(slow.Err(), ErrSlowSubscriber) {
		t.Fatalf("slow.Err() = %v, want ErrSlowSubscriber", slow.Err())
	}
	if fast.Err() != nil {
		t.Fatalf("fast.Err() = %v, want nil", fast.Err())
	}
	if got := len(slow.Events()); got != buffer {
		t.Fatalf("slow subscriber holds %d buffered events, want %d", got, buffer)
	}
	if h.Subscribers() != 1 || h.CutOffs() != 1 {
		t.Fatalf("Subscribers = %d, CutOffs = %d; want 1 and 1", h.Subscribers(), h.CutOffs())
	}
}

func TestHubCloseEndsSubscriptions(t *testing.T) {
	checkLeaks(t)
	h := NewHub()
	s1, s2 := h.Subscribe("a"), h.Subscribe("b")
	h.Close()
	for _, s := range []*Subscription{s1, s2} {
		<-s.Done()
		if !errors.Is(s.Err(), ErrHubClosed) {
			t.Fatalf("Err = %v, want ErrHubClosed", s.Err())
		}
		s.Close() // still safe; the reason stays
		if !errors.Is(s.Err(), ErrHubClosed) {
			t.Fatalf("Err after Close = %v, want ErrHubClosed", s.Err())
		}
	}
	h.Close() // idempotent
	h.Publish(ev("a", 1))
	late := h.Subscribe("a")
	<-late.Done()
	if !errors.Is(late.Err(), ErrHubClosed) || agentd.ErrorCode(late.Err()) != agentd.EUNAVAILABLE {
		t.Fatalf("late subscription Err = %v, want ErrHubClosed (unavailable)", late.Err())
	}
	late.Close()
	if h.Subscribers() != 0 {
		t.Fatalf("Subscribers = %d after Close", h.Subscribers())
	}
}

func TestSubscriptionClose(t *testing.T) {
	checkLeaks(t)
	h := NewHub()
	s := h.Subscribe("a")
	if s.Err() != nil {
		t.Fatalf("live subscription Err = %v", s.Err())
	}
	s.Close()
	s.Close()
	<-s.Done()
	if !errors.Is(s.Err(), ErrUnsubscribed) || h.Subscribers() != 0 {
		t.Fatalf("Err = %v, Subscribers = %d", s.Err(), h.Subscribers())
	}
	h.Publish(ev("a", 1))
	if len(s.Events()) != 0 {
		t.Fatal("closed subscription received an event")
	}
}

// Run with -race: Close, Publish and Hub.Close race freely.
func TestHubConcurrentPublishSubscribeClose(t *testing.T) {
	checkLeaks(t)
	h := NewHub(WithBuffer(2))
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(1); i <= 500; i++ {
				h.Publish(ev("c", i))
			}
		}()
	}
	for s := 0; s < 8; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				sub := h.Subscribe("c")
				select {
				case <-sub.Events():
				case <-sub.Done():
				default:
				}
				sub.Close()
				sub.Close()
			}
		}()
	}
	wg.Wait()
	h.Close()
	if h.Subscribers() != 0 {
		t.Fatalf("Subscribers = %d", h.Subscribers())
	}
}

// publishNew, PublishFeed's path, skips an event whose Seq the hub has
// published to the conversation's subscribers already (a replica's own
// commit, which reached the hub from the loop first) and hands on the
// rest; what it remembers goes with the conversation's last subscriber.
func TestHubPublishNewSkipsPublished(t *testing.T) {
	h := NewHub()
	s := h.Subscribe("a")
	h.Publish(ev("a", 1))
	h.publishNew(ev("a", 1))
	h.publishNew(ev("a", 2))
	h.Publish(ev("a", 3))
	h.publishNew(ev("a", 2)) // older than the newest published: the stream has it or fills the gap
	h.publishNew(ev("b", 1)) // another conversation's own count
	var got []int64
	for len(s.Events()) > 0 {
		got = append(got, (<-s.Events()).Seq)
	}
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("delivered seqs %v, want [1 2 3]", got)
	}
	s.Close()
	s = h.Subscribe("a")
	defer s.Close()
	h.publishNew(ev("a", 3))
	if len(s.Events()) != 1 {
		t.Fatalf("a new subscriber got %d events, want the one published after it came", len(s.Events()))
	}
}
