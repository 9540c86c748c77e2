package healthz

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Background runs a Prober's check off the probe's path and answers each
// probe from the last check that ended: healthy while no check has failed
// and none has run longer than StuckAfter.
//
// Why: a node's check reads its volume groups, which is disk IO on the
// disks its volumes use. Answered inside the probe's 10 s, it failed
// whenever those disks were busy: in the two-node e2e, 50 mkfs on the VM
// node's VG (another workload's, not Carve's) held one metadata read past
// the budget three probes in a row, and kubelet restarted carve node, which
// helped nothing and cut the work it had under way. A slow disk is not a
// hung process; a check that never ends is, and still fails the probe,
// StuckAfter after it began. A check that ends in an error (a VG that
// cannot be read) fails the probe as before, one probe later.
type Background struct {
	Prober Prober
	// Every is how often a check starts, at most (one runs at a time).
	Every time.Duration
	// StuckAfter is how long a check may run before the probe fails; it
	// is also the check's own deadline.
	StuckAfter time.Duration
	now        func() time.Time

	mu      sync.Mutex
	running bool
	started time.Time // of the check running
	ended   time.Time // of the last check that ended
	lastErr error     // its result
}

// NewBackground checks p at most every every; a check running longer than
// stuckAfter fails the probe.
func NewBackground(p Prober, every, stuckAfter time.Duration) *Background {
	return &Background{Prober: p, Every: every, StuckAfter: stuckAfter, now: time.Now}
}

// Probe starts a check when the last one is older than Every, and answers
// from the last one that ended (healthy before the first ends).
func (b *Background) Probe(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if !b.running && (b.ended.IsZero() || now.Sub(b.ended) >= b.Every) {
		b.running, b.started = true, now
		go b.check()
	}
	if b.running && now.Sub(b.started) > b.StuckAfter {
		return fmt.Errorf("a check begun %s ago has not ended (lvm2 or the disks hang)", now.Sub(b.started).Round(time.Second))
	}
	return b.lastErr
}

// check runs one check and records its result.
func (b *Background) check() {
	ctx, cancel := context.WithTimeout(context.Background(), b.StuckAfter)
	defer cancel()
	err := b.Prober.Probe(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running, b.ended, b.lastErr = false, b.now(), err
}
