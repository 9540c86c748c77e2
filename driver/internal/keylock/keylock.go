// Package keylock serialises operations per key (a volume ID, a volume name)
// without blocking: a second operation on a busy key is refused at once, so
// that the caller can answer ABORTED ("operation pending") as the CSI spec
// asks, instead of queueing retries from an impatient CO behind a slow one.
package keylock

import "sync"

// Set holds the keys that are busy right now. The zero value is ready to use.
type Set struct {
	mu   sync.Mutex
	busy map[string]struct{}
}

// TryLock marks key busy and returns its release function, or returns false
// when key is already busy. release is safe to call once.
func (s *Set) TryLock(key string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy == nil {
		s.busy = make(map[string]struct{})
	}
	if _, taken := s.busy[key]; taken {
		return nil, false
	}
	s.busy[key] = struct{}{}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.busy, key)
			s.mu.Unlock()
		})
	}, true
}
