//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// clusterSoak is the soak's model of what it asked for, and its state.
// Everything runs in the test's goroutine: the loop polls the operations
// in flight, Kubernetes and Carve do the work side by side.
type clusterSoak struct {
	t      *testing.T
	cfg    soakConfig
	rng    *rand.Rand
	began  time.Time
	seq    int
	claims []*soakClaim
	snaps  []*soakSnap
	ops    []*soakOp
	base   soakBase
	stats  *soakStats
	ending bool // the end check: whatever differs from the (empty) model leaked
	// recovering: the components killed and not ready again yet.
	recovering map[string]bool
}

// soakClaim is a claim the soak made, and what it expects of it.
type soakClaim struct {
	name  string
	class *soakClass
	size  int64 // bytes asked for, the last expansion's
	pv    string
	// handle is the PV's CSI volume handle (node/vg/lv).
	handle string
	pod    *corev1.Pod // its writer, while one runs
	pods   int         // writers started, naming the next
	acked  ackedWrites
	busy   bool // an operation on it is in flight
}

// soakSnap is a VolumeSnapshot the soak made.
type soakSnap struct {
	name     string
	class    *soakClass // the source's
	source   string
	size     int64 // the source's LV size when taken: the restore size
	acked    ackedWrites
	content  string // VolumeSnapshotContent, once ready
	lv       string // its LV, from the content's handle
	busy     bool
	restores int // restores from it being made
}

// soakOp is an operation in flight: it is done once reached says its
// wanted state holds; then done checks what it left and updates the model.
type soakOp struct {
	kind     string // what the report counts
	what     string // for the log and failures
	began    time.Time
	deadline time.Duration
	reached  func(ctx context.Context) (bool, error)
	done     func()
	last     string   // what reached last said, for a failure
	about    []string // objects whose events a failure shows
	recovery bool     // a kill's recovery, not an operation on the model
}

const soakLabel = "carve.dev/e2e-soak"

func newClusterSoak(t *testing.T, cfg soakConfig) *clusterSoak {
	return &clusterSoak{t: t, cfg: cfg, rng: newSoakRand(cfg.seed), began: time.Now(), stats: newSoakStats(),
		recovering: map[string]bool{}}
}

func (s *clusterSoak) logf(format string, args ...any) {
	s.t.Helper()
	s.t.Logf("soak +%4.0fs: %s", time.Since(s.began).Seconds(), fmt.Sprintf(format, args...))
}

// push starts tracking an operation whose request was just made.
func (s *clusterSoak) push(op *soakOp) {
	op.began = time.Now()
	if op.deadline == 0 {
		op.deadline = s.cfg.deadline
	}
	if !op.recovery {
		s.stats.began(op.kind)
	}
	s.logf("%s", op.what)
	s.ops = append(s.ops, op)
}

// inFlight counts the operations on the model (recoveries aside).
func (s *clusterSoak) inFlight() int {
	n := 0
	for _, op := range s.ops {
		if !op.recovery {
			n++
		}
	}
	return n
}

// advance polls every operation in flight once: the ones done run their
// checks; one past its deadline fails the soak.
func (s *clusterSoak) advance() {
	var keep []*soakOp
	for _, op := range s.ops {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ok, err := op.reached(ctx)
		cancel()
		if err != nil {
			op.last = err.Error()
		}
		took := time.Since(op.began)
		switch {
		case ok:
			op.done()
			s.stats.finished(op.kind, took)
			s.logf("%s: done in %s", op.what, took.Round(time.Second))
		case took > op.deadline:
			s.stats.stuck++
			s.t.Fatalf("%s: not done %s after it was asked for (its deadline %s); last seen: %s\n%s%s",
				op.what, took.Round(time.Second), op.deadline, op.last, s.describe(), eventsAbout(op.about))
		default:
			keep = append(keep, op)
		}
	}
	s.ops = keep
}

// eventsAbout lists the events about the named objects, for a failure.
func eventsAbout(names []string) string {
	var b strings.Builder
	for _, n := range names {
		evs, err := events(context.Background(), n)
		fmt.Fprintf(&b, "  events about %s (%v):\n", n, err)
		for _, e := range evs {
			fmt.Fprintf(&b, "    %s\n", e)
		}
	}
	return b.String()
}

// describe is the model's state, for a failure.
func (s *clusterSoak) describe() string {
	var b strings.Builder
	for _, c := range s.claims {
		pod := "-"
		if c.pod != nil {
			pod = c.pod.Name
		}
		fmt.Fprintf(&b, "  claim %s (%s, %d MiB, PV %s, pod %s, %d writes acknowledged, busy %v)\n",
			c.name, c.class.name, c.size/mi, c.pv, pod, c.acked.count(), c.busy)
	}
	for _, sn := range s.snaps {
		fmt.Fprintf(&b, "  snapshot %s of %s (LV %s, busy %v, %d restores under way)\n", sn.name, sn.source, sn.lv, sn.busy, sn.restores)
	}
	for _, op := range s.ops {
		fmt.Fprintf(&b, "  in flight: %s, for %s\n", op.what, time.Since(op.began).Round(time.Second))
	}
	return b.String()
}

// next names a new object of the soak.
func (s *clusterSoak) next(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s-%d", prefix, s.seq)
}

// pick returns one of items at random.
func pick[T any](s *clusterSoak, items []T) T { return items[s.rng.IntN(len(items))] }

// claimsWhere and snapsWhere are the claims and snapshots free for an
// operation (none in flight on them) that ok takes.
func (s *clusterSoak) claimsWhere(ok func(*soakClaim) bool) []*soakClaim {
	return slices.DeleteFunc(slices.Clone(s.claims), func(c *soakClaim) bool { return c.busy || !ok(c) })
}

func (s *clusterSoak) snapsWhere(ok func(*soakSnap) bool) []*soakSnap {
	return slices.DeleteFunc(slices.Clone(s.snaps), func(sn *soakSnap) bool { return sn.busy || !ok(sn) })
}

// startSome starts random operations until soakInFlight are in flight or
// none can start.
func (s *clusterSoak) startSome() {
	for s.inFlight() < soakInFlight {
		if !s.startOne() {
			return
		}
	}
}

// startOne starts one operation, chosen by weight among those the model
// allows now; false when none is allowed.
func (s *clusterSoak) startOne() bool {
	withPod := s.claimsWhere(func(c *soakClaim) bool { return c.pod != nil })
	idle := s.claimsWhere(func(c *soakClaim) bool { return c.pod == nil })
	bound := s.claimsWhere(func(c *soakClaim) bool { return c.pv != "" })
	ready := s.snapsWhere(func(sn *soakSnap) bool { return sn.lv != "" })
	unused := s.snapsWhere(func(sn *soakSnap) bool { return sn.lv != "" && sn.restores == 0 })
	room := len(s.claims) < soakMaxClaims
	full := 1 // deletions weigh more once the model is full
	if !room {
		full = 3
	}
	fresh := 1 // new claims weigh less once there are a few, so that restores get room
	if len(s.claims) < 3 {
		fresh = 3
	}
	type choice struct {
		weight int
		start  func()
	}
	choices := []choice{
		{weigh(room, fresh), func() { s.createClaim(pick(s, soakClasses)) }},
		{weigh(len(idle) > 0, 3), func() { s.startPod(pick(s, idle)) }},
		{weigh(len(withPod) > 0, 2), func() { s.stopPod(pick(s, withPod)) }},
		{weigh(len(idle) > 0, full), func() { s.deleteClaim(pick(s, idle)) }},
		{weigh(len(bound) > 0 && len(s.snaps) < soakMaxSnaps, 2), func() { s.snapshot(pick(s, bound)) }},
		{weigh(len(ready) > 0 && room, 3), func() { s.restore(pick(s, ready)) }},
		{weigh(len(withPod) > 0, 2), func() { s.expand(pick(s, withPod)) }},
		{weigh(len(unused) > 0, full), func() { s.deleteSnapshot(pick(s, unused)) }},
	}
	total := 0
	for _, c := range choices {
		total += c.weight
	}
	if total == 0 {
		return false
	}
	n := s.rng.IntN(total)
	for _, c := range choices {
		if n < c.weight {
			c.start()
			return true
		}
		n -= c.weight
	}
	return false
}

func weigh(allowed bool, w int) int {
	if allowed {
		return w
	}
	return 0
}
