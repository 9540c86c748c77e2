package keylock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
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

// Lock waits for the holder's release, on that key only, and gives up
// when its context ends.
func TestLockWaitsForTheRelease(t *testing.T) {
	var s Set
	release, err := s.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Lock(context.Background(), "b")
	if err != nil {
		t.Fatalf("another key: %v", err)
	}
	other()
	got := make(chan func(), 1)
	go func() {
		r, err := s.Lock(context.Background(), "a")
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	select {
	case <-got:
		t.Fatal("a second Lock of a held key returned before the release")
	case <-time.After(50 * time.Millisecond):
	}
	if _, ok := s.TryLock("a"); ok {
		t.Fatal("TryLock of a held key succeeded")
	}
	release()
	second := <-got
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Lock(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock of a held key past its deadline: %v", err)
	}
	second()
	if r, ok := s.TryLock("a"); !ok {
		t.Error("key still busy after both releases")
	} else {
		r()
	}
}
