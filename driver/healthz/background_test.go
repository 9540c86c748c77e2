package healthz

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// gated is a Prober whose checks wait for release and then return err.
type gated struct {
	mu      sync.Mutex
	err     error
	release chan struct{}
	calls   int
}

func (g *gated) Probe(ctx context.Context) error {
	g.mu.Lock()
	g.calls++
	rel, err := g.release, g.err
	g.mu.Unlock()
	select {
	case <-rel:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// waitIdle waits until b has no check running.
func waitIdle(t *testing.T, b *Background) {
	t.Helper()
	for range 1000 {
		b.mu.Lock()
		r := b.running
		b.mu.Unlock()
		if !r {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the check did not end")
}

func TestBackgroundSlowCheckIsNotAFailure(t *testing.T) {
	g := &gated{release: make(chan struct{})}
	c := &clock{t: time.Unix(1000, 0)}
	b := NewBackground(g, 20*time.Second, 2*time.Minute)
	b.now = c.now
	// The first probe starts a check and, with none ended, is healthy;
	// while the check is slow (disk IO), probes stay healthy.
	for range 4 {
		if err := b.Probe(context.Background()); err != nil {
			t.Fatalf("probe during a slow check: %v", err)
		}
		c.add(30 * time.Second)
	}
	// Past StuckAfter the check counts as hung.
	c.add(time.Minute)
	if err := b.Probe(context.Background()); err == nil {
		t.Fatal("a check running past StuckAfter passed the probe")
	}
	close(g.release)
	waitIdle(t, b)
	if err := b.Probe(context.Background()); err != nil {
		t.Fatalf("after the check ended well: %v", err)
	}
	if g.calls != 1 {
		t.Errorf("%d checks, want 1 (one at a time)", g.calls)
	}
}

func TestBackgroundFailedCheckFailsTheProbe(t *testing.T) {
	rel := make(chan struct{})
	close(rel)
	g := &gated{release: rel, err: errors.New("volume group vg0: not found")}
	c := &clock{t: time.Unix(1000, 0)}
	b := NewBackground(g, 20*time.Second, 2*time.Minute)
	b.now = c.now
	_ = b.Probe(context.Background())
	waitIdle(t, b)
	if err := b.Probe(context.Background()); err == nil || err.Error() != g.err.Error() {
		t.Fatalf("probe after a failed check: %v, want %v", err, g.err)
	}
	// Within Every no new check starts; after it one does, and its
	// success clears the failure.
	g.mu.Lock()
	g.err = nil
	g.mu.Unlock()
	_ = b.Probe(context.Background())
	if g.calls != 1 {
		t.Fatalf("%d checks within Every, want 1", g.calls)
	}
	c.add(21 * time.Second)
	_ = b.Probe(context.Background())
	waitIdle(t, b)
	if err := b.Probe(context.Background()); err != nil {
		t.Fatalf("after a good check: %v", err)
	}
}
