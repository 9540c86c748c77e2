//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"carve.dev/carve/test/soakmodel"
)

// clusterSoak drives the soak's model (soakmodel) through Kubernetes
// objects. Everything runs in the test's goroutine: the loop polls the
// operations in flight, Kubernetes and Carve do the work side by side.
// A snapshot's ID is its VolumeSnapshotContent.
type clusterSoak struct {
	t        *testing.T
	cfg      soakmodel.Config
	rng      *rand.Rand
	began    time.Time
	model    soakmodel.Model[*soakClaim]
	ops      []*soakOp
	base     soakBase
	stats    *soakmodel.Stats
	verdicts *soakmodel.Checker
	// recovering: the components killed and not ready again yet.
	recovering map[string]bool
}

// soakClaim is a claim the soak made: a volume of the model (its size the
// bytes asked for, the last expansion's; its LV its PV's name; its ID the
// PV's CSI volume handle, node/vg/lv), attached while a writer runs.
type soakClaim struct {
	soakmodel.Volume
	pod  *corev1.Pod // its writer, while one runs
	pods int         // writers started, naming the next
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

func newClusterSoak(t *testing.T, cfg soakmodel.Config) *clusterSoak {
	stats := soakmodel.NewStats()
	return &clusterSoak{t: t, cfg: cfg, rng: soakmodel.NewRand(cfg.Seed), began: time.Now(), stats: stats,
		verdicts: &soakmodel.Checker{Stats: stats, Fail: func(msg string) { t.Error(msg) }}, recovering: map[string]bool{}}
}

func (s *clusterSoak) logf(format string, args ...any) {
	s.t.Helper()
	s.t.Logf("soak +%4.0fs: %s", time.Since(s.began).Seconds(), fmt.Sprintf(format, args...))
}

// push starts tracking an operation whose request was just made.
func (s *clusterSoak) push(op *soakOp) {
	op.began = time.Now()
	if op.deadline == 0 {
		op.deadline = s.cfg.Deadline
	}
	if !op.recovery {
		s.stats.Began(op.kind)
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
			if op.recovery {
				s.stats.Longest("slowest back to ready", took)
			} else {
				s.stats.Done(op.kind, took)
			}
			s.logf("%s: done in %s", op.what, took.Round(time.Second))
		case took > op.deadline:
			s.stats.Stuck()
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
	for _, c := range s.model.Volumes {
		pod := "-"
		if c.pod != nil {
			pod = c.pod.Name
		}
		fmt.Fprintf(&b, "  claim %s (%s, %d MiB, PV %s, pod %s, %d writes acknowledged, busy %v)\n",
			c.Name, c.Layout.Name, c.Size/mi, c.LV, pod, c.Writes.Count(), c.Busy)
	}
	for _, sn := range s.model.Snapshots {
		fmt.Fprintf(&b, "  snapshot %s of %s (LV %s, busy %v, %d restores under way)\n", sn.Name, sn.Source, sn.LV, sn.Busy, sn.Restores)
	}
	for _, op := range s.ops {
		fmt.Fprintf(&b, "  in flight: %s, for %s\n", op.what, time.Since(op.began).Round(time.Second))
	}
	return b.String()
}

// pick returns one of items at random.
func pick[T any](s *clusterSoak, items []T) T { return soakmodel.One(s.rng, items) }

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
	m := &s.model
	withPod := m.Idle(func(c *soakClaim) bool { return c.pod != nil })
	idle := m.Idle(func(c *soakClaim) bool { return c.pod == nil })
	bound := m.Idle(func(c *soakClaim) bool { return c.LV != "" })
	ready := m.IdleSnapshots(func(sn *soakmodel.Snapshot) bool { return sn.LV != "" })
	unused := m.IdleSnapshots(func(sn *soakmodel.Snapshot) bool { return sn.LV != "" && sn.Restores == 0 })
	room := len(m.Volumes) < soakMaxClaims
	full := 1 // deletions weigh more once the model is full
	if !room {
		full = 3
	}
	fresh := 1 // new claims weigh less once there are a few, so that restores get room
	if len(m.Volumes) < 3 {
		fresh = 3
	}
	when := soakmodel.When
	return soakmodel.Pick(s.rng, []soakmodel.Choice{
		{Weight: when(room, fresh), Do: func() { s.createClaim(pick(s, soakClasses)) }},
		{Weight: when(len(idle) > 0, 3), Do: func() { s.startPod(pick(s, idle)) }},
		{Weight: when(len(withPod) > 0, 2), Do: func() { s.stopPod(pick(s, withPod)) }},
		{Weight: when(len(idle) > 0, full), Do: func() { s.deleteClaim(pick(s, idle)) }},
		{Weight: when(len(bound) > 0 && len(m.Snapshots) < soakMaxSnaps, 2), Do: func() { s.snapshot(pick(s, bound)) }},
		{Weight: when(len(ready) > 0 && room, 3), Do: func() { s.restore(pick(s, ready)) }},
		{Weight: when(len(withPod) > 0, 2), Do: func() { s.expand(pick(s, withPod)) }},
		{Weight: when(len(unused) > 0, full), Do: func() { s.deleteSnapshot(pick(s, unused)) }},
	})
}
