package keylock

import (
	"sync"
	"testing"
)

func TestTryLockRefusesBusyKey(t *testing.T) {
	var s Set
	release, ok := s.TryLock("a")
	if !ok {
		t.Fatal("first TryLock on a free key failed")
	}
	if _, ok := s.TryLock("a"); ok {
		t.Fatal("second TryLock on a busy key succeeded")
	}
	if r, ok := s.TryLock("b"); !ok {
		t.Fatal("TryLock on another key failed")
	} else {
		r()
	}
	release()
	release() // a second release must not free a key someone else took
	r2, ok := s.TryLock("a")
	if !ok {
		t.Fatal("TryLock after release failed")
	}
	release()
	if _, ok := s.TryLock("a"); ok {
		t.Fatal("stale release freed a key held by another owner")
	}
	r2()
}

func TestTryLockConcurrentOnlyOneWins(t *testing.T) {
	var s Set
	const n = 64
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, ok := s.TryLock("k"); ok {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d goroutines took the same key, want 1", wins)
	}
}
