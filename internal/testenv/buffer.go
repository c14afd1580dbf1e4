package testenv

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for a process's writer goroutines and the
// test's reads. With Limit set, output past Limit bytes is dropped.
type Buffer struct {
	Limit int
	mu    sync.Mutex
	b     bytes.Buffer
}

// Write implements io.Writer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Limit > 0 && s.b.Len() > s.Limit {
		return len(p), nil
	}
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
