package process

import (
	"bytes"
	"strings"
	"sync"
)

// limitedBuffer keeps up to limit bytes and calls onOverflow once when
// more arrive. It is written by exec's copying goroutine and read after
// Wait, and guarded anyway.
type limitedBuffer struct {
	mu         sync.Mutex
	buf        bytes.Buffer
	limit      int
	over       bool
	onOverflow func()
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.over {
		return len(p), nil
	}
	if b.buf.Len()+len(p) > b.limit {
		b.over = true
		if b.onOverflow != nil {
			b.onOverflow()
		}
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *limitedBuffer) overflowed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over
}

func (b *limitedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Bytes()
}

// tailBuffer keeps only the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	buf   []byte
	limit int
	cut   bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.limit:]...)
		b.cut = true
	}
	return len(p), nil
}

// String returns the tail, starting on a rune boundary, marked "…" when
// earlier output was dropped.
func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tail, cut := b.buf, b.cut
	if len(tail) > b.limit {
		tail, cut = tail[len(tail)-b.limit:], true
	}
	for len(tail) > 0 && !isRuneStart(tail[0]) {
		tail = tail[1:]
	}
	s := strings.ToValidUTF8(string(tail), "\uFFFD")
	if cut {
		return "…" + strings.TrimLeft(s, " \t\r\n")
	}
	return s
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
