package loop

import "testing"

// The histories kept for conversations' next drivers: one per
// conversation of one tenant, taken by one driver at a time, at most max,
// the least recently put dropped first; none when max is not positive.
func TestHistorySet(t *testing.T) {
	s := historySet{max: 2}
	a, b, c := newHistoryCache("t1", "conv_a"), newHistoryCache("t1", "conv_b"), newHistoryCache("t1", "conv_c")
	s.put(a)
	if h := s.take("t2", "conv_a"); h != nil {
		t.Fatalf("another tenant took conv_a's history")
	}
	if h := s.take("t1", "conv_a"); h != a {
		t.Fatalf("take(conv_a) = %p, want %p", h, a)
	}
	if h := s.take("t1", "conv_a"); h != nil {
		t.Fatalf("conv_a's history taken twice")
	}
	s.put(a)
	s.put(newHistoryCache("t1", "conv_a")) // the newer of the conversation stays
	s.put(b)
	s.put(c) // drops conv_a's, the least recently put
	if n := s.len(); n != 2 {
		t.Fatalf("%d histories kept, want 2", n)
	}
	if s.take("t1", "conv_a") != nil || s.take("t1", "conv_b") != b || s.take("t1", "conv_c") != c {
		t.Fatalf("kept the wrong histories")
	}
	none := historySet{max: -1}
	none.put(a)
	if none.len() != 0 {
		t.Fatalf("a set of max -1 kept a history")
	}
}
