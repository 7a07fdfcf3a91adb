package framework

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is an io.Writer safe for concurrent use that keeps everything a
// process printed, so its tail can go into a test failure.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Reset drops what was written (a retried process starts a fresh log).
func (b *Buffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns the complete lines written so far.
func (b *Buffer) Lines() []string {
	s := b.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		return nil
	}
	return strings.Split(s, "\n")
}

// Containing returns the complete lines holding s.
func (b *Buffer) Containing(s string) []string {
	var out []string
	for _, l := range b.Lines() {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// Tail returns the last n lines.
func (b *Buffer) Tail(n int) string {
	lines := b.Lines()
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TailMatching returns the last n lines for which keep is true.
func (b *Buffer) TailMatching(n int, keep func(string) bool) string {
	var out []string
	for _, l := range b.Lines() {
		if keep(l) {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}
