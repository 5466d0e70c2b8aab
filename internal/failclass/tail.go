package failclass

import (
	"bytes"
	"sync"
)

// Tail keeps the last lines written to it, at most Lines lines and Bytes
// bytes (a line longer than that keeps its end). It is an io.Writer for a
// rank's stderr, safe for concurrent use.
type Tail struct {
	Lines, Bytes int
	mu           sync.Mutex
	lines        [][]byte
	size         int
	part         []byte // the line being written, without its newline
}

// Default bounds of a rank's tail.
const (
	TailLines = 64
	TailBytes = 16 << 10
)

// NewTail is a Tail with the default bounds.
func NewTail() *Tail { return &Tail{Lines: TailLines, Bytes: TailBytes} }

// Write keeps p's lines; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.part = append(t.part, p...)
			if len(t.part) > t.Bytes {
				t.part = append(t.part[:0], t.part[len(t.part)-t.Bytes:]...)
			}
			break
		}
		t.part = append(t.part, p[:i]...)
		t.push(t.part)
		t.part = nil
		p = p[i+1:]
	}
	return n, nil
}

func (t *Tail) push(l []byte) {
	l = bytes.TrimRight(l, "\r")
	if len(l) > t.Bytes {
		l = l[len(l)-t.Bytes:]
	}
	t.lines = append(t.lines, append([]byte(nil), l...))
	t.size += len(l)
	for len(t.lines) > t.Lines || t.size > t.Bytes {
		t.size -= len(t.lines[0])
		t.lines = t.lines[1:]
	}
}

// Text is the kept lines, oldest first, with an unfinished last line.
func (t *Tail) Text() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.lines)+1)
	for _, l := range t.lines {
		out = append(out, string(l))
	}
	if len(t.part) > 0 {
		out = append(out, string(t.part))
	}
	return out
}
