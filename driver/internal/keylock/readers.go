package keylock

import (
	"context"
	"sync"
)

// Readers tracks the long reads of each key (a snapshot's block metadata
// streamed to a client) so that what ends the key (the snapshot's
// deletion) can stop them instead of waiting for them: a stream may last
// as long as its client reads. The zero value is ready to use.
type Readers struct {
	mu sync.Mutex
	// reads: each key's running reads, by their cancel functions.
	reads map[string]map[*context.CancelCauseFunc]struct{}
	// stopped: each key's Stops in progress (a count: two deletes of one
	// snapshot may overlap) with the cause the first gave.
	stopped map[string]stop
}

type stop struct {
	n     int
	cause error
}

// Read registers a read of key. It returns ctx's child, cancelled with
// Stop's cause if a Stop of key runs before done is called, and done,
// which the read calls once it has ended. While a Stop of key is in
// progress a read is refused with its cause.
func (r *Readers) Read(ctx context.Context, key string) (context.Context, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.stopped[key]; ok {
		return nil, nil, s.cause
	}
	if r.reads == nil {
		r.reads = map[string]map[*context.CancelCauseFunc]struct{}{}
	}
	if r.reads[key] == nil {
		r.reads[key] = map[*context.CancelCauseFunc]struct{}{}
	}
	rctx, cancel := context.WithCancelCause(ctx)
	r.reads[key][&cancel] = struct{}{}
	var once sync.Once
	return rctx, func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.reads[key], &cancel)
			if len(r.reads[key]) == 0 {
				delete(r.reads, key)
			}
			r.mu.Unlock()
			cancel(nil)
		})
	}, nil
}

// Stop cancels every read of key with cause and refuses new ones until
// resume is called (once its caller has ended the key, or failed to).
func (r *Readers) Stop(key string, cause error) (resume func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped == nil {
		r.stopped = map[string]stop{}
	}
	s := r.stopped[key]
	if s.n == 0 {
		s.cause = cause
	}
	s.n++
	r.stopped[key] = s
	for cancel := range r.reads[key] {
		(*cancel)(cause)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			s := r.stopped[key]
			if s.n--; s.n == 0 {
				delete(r.stopped, key)
			} else {
				r.stopped[key] = s
			}
		})
	}
}
