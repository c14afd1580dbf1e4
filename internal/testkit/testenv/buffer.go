package testenv

import (
	"bytes"
	"sync"
	"time"
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

// Await returns what was written once done holds for it, or when limit
// has passed: a process's output may lag behind its answers.
func (s *Buffer) Await(done func(string) bool, limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for {
		out := s.String()
		if done(out) || time.Now().After(deadline) {
			return out
		}
		time.Sleep(10 * time.Millisecond)
	}
}
