// Package keylock serialises operations per key (a volume ID, a volume name).
// TryLock never blocks: a second operation on a busy key is refused at once,
// so that the caller can answer ABORTED ("operation pending") as the CSI spec
// asks, instead of queueing retries from an impatient CO behind a slow one.
// Lock waits, for short work that two callers must not interleave.
package keylock

import (
	"context"
	"sync"
)

// Set holds the keys that are busy right now. The zero value is ready to use.
type Set struct {
	mu sync.Mutex
	// busy: each busy key's channel, closed when it is released.
	busy map[string]chan struct{}
}

// TryLock marks key busy and returns its release function, or returns false
// when key is already busy. release is safe to call once.
func (s *Set) TryLock(key string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	release, _ = s.take(key)
	return release, release != nil
}

// Lock waits until key is free, marks it busy and returns its release
// function; ctx's end stops the wait with ctx's error.
func (s *Set) Lock(ctx context.Context, key string) (release func(), err error) {
	for {
		s.mu.Lock()
		release, held := s.take(key)
		s.mu.Unlock()
		if release != nil {
			return release, nil
		}
		select {
		case <-held:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// take marks key busy (release non-nil), or returns the channel of its
// holder. s.mu is held.
func (s *Set) take(key string) (release func(), held <-chan struct{}) {
	if s.busy == nil {
		s.busy = make(map[string]chan struct{})
	}
	if ch, taken := s.busy[key]; taken {
		return nil, ch
	}
	ch := make(chan struct{})
	s.busy[key] = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.busy, key)
			s.mu.Unlock()
			close(ch)
		})
	}, nil
}
