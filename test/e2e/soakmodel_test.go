//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"carve.dev/carve/test/soakmodel"
)

// clusterSoak drives the soak's model (soakmodel) through Kubernetes
// objects. Everything runs in the test's goroutine: the loop polls the
// operations in flight, Kubernetes and Carve do the work side by side.
// A snapshot's ID is its VolumeSnapshotContent.
type clusterSoak struct {
	t     *testing.T
	cfg   soakmodel.Config
	rng   *rand.Rand
	began time.Time
	model soakmodel.Model[*soakClaim]
	ops   []*soakOp
	// nodes: the VM nodes, where the soak's volumes live; base: each
	// one's VG before the soak.
	nodes    []string
	base     map[string]soakBase
	stats    *soakmodel.Stats
	verdicts *soakmodel.Checker
	// recovering: the carve containers killed (soakTarget.String) and
	// not ready again yet; kills: every kill so far, to tell whether one
	// may explain a failure.
	recovering map[string]bool
	kills      []soakKill
}

// soakKill is a kill of a carve container: what, and when.
type soakKill struct {
	at   time.Time
	what string
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
	// across: its data goes from one VM node to the other (a restore
	// across nodes, a move): the report counts the kills that land on one.
	across bool
}

// soakFailure is what an operation's reached returns when it can never
// reach its wanted state (a VolumeMove Failed): the soak fails at once.
type soakFailure struct{ msg string }

func (f *soakFailure) Error() string { return f.msg }

const soakLabel = "carve.dev/e2e-soak"

func newClusterSoak(t *testing.T, cfg soakmodel.Config) *clusterSoak {
	stats := soakmodel.NewStats()
	return &clusterSoak{t: t, cfg: cfg, rng: soakmodel.NewRand(cfg.Seed), began: time.Now(), stats: stats,
		nodes: lvmNodes(), base: map[string]soakBase{},
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

// inFlight counts the operations on the model (recoveries aside), and
// those of them whose data goes across nodes.
func (s *clusterSoak) inFlight() (n, across int) {
	for _, op := range s.ops {
		if !op.recovery {
			n++
		}
		if op.across {
			across++
		}
	}
	return n, across
}

// advance polls every operation in flight once: the ones done run their
// checks, which may start the operation that follows (a move's cut-over);
// one past its deadline, or that never can reach its wanted state, fails
// the soak.
func (s *clusterSoak) advance() {
	var keep []*soakOp
	polled := len(s.ops) // the dones push after these
	for _, op := range s.ops[:polled] {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ok, err := op.reached(ctx)
		cancel()
		if err != nil {
			op.last = err.Error()
		}
		took := time.Since(op.began)
		var failure *soakFailure
		switch {
		case errors.As(err, &failure):
			s.t.Fatalf("%s: %v (after %s)\n%s%s", op.what, err, took.Round(time.Second), s.describe(), eventsAbout(op.about))
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
	s.ops = append(keep, s.ops[polled:]...)
}

// killsSince lists the kills made since t, for a failure: one of them
// may be the cause.
func (s *clusterSoak) killsSince(t time.Time) string {
	var out []string
	for _, k := range s.kills {
		if !k.at.Before(t) {
			out = append(out, fmt.Sprintf("%s at +%.0fs", k.what, k.at.Sub(s.began).Seconds()))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
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
		fmt.Fprintf(&b, "  claim %s (%s, %d MiB, on %s, PV %s, pod %s, %d writes acknowledged, busy %v)\n",
			c.Name, c.Layout.Name, c.Size/mi, c.Node, c.LV, pod, c.Writes.Count(), c.Busy)
	}
	for _, sn := range s.model.Snapshots {
		fmt.Fprintf(&b, "  snapshot %s of %s (on %s, LV %s, busy %v, %d restores under way)\n", sn.Name, sn.Source, sn.Node, sn.LV, sn.Busy, sn.Restores)
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
	for {
		if n, _ := s.inFlight(); n >= soakInFlight || !s.startOne() {
			return
		}
	}
}

// startOne starts one operation, chosen by weight among those the model
// allows now (soakOptions); false when none is allowed.
func (s *clusterSoak) startOne() bool {
	var cs []soakmodel.Choice
	for _, o := range soakOptions(&s.model, s.nodes) {
		cs = append(cs, soakmodel.Choice{Weight: o.weight, Do: func() { s.start(o) }})
	}
	return soakmodel.Pick(s.rng, cs)
}

// start starts o on one of its claims or snapshots, at random, or makes
// a claim of a random class on a random VM node.
func (s *clusterSoak) start(o soakOption) {
	onClaim := map[soakAct]func(*soakClaim){actStartPod: s.startPod, actStopPod: s.stopPod, actDeleteClaim: s.deleteClaim,
		actSnapshot: s.snapshot, actExpand: s.expand, actMove: s.move}
	onSnapshot := map[soakAct]func(*soakmodel.Snapshot){actDeleteSnapshot: s.deleteSnapshot,
		actRestore:       func(sn *soakmodel.Snapshot) { s.restore(sn, sn.Node) },
		actRestoreAcross: func(sn *soakmodel.Snapshot) { s.restore(sn, soakmodel.Other(s.nodes, sn.Node)) }}
	switch {
	case onClaim[o.act] != nil:
		onClaim[o.act](pick(s, o.claims))
	case onSnapshot[o.act] != nil:
		onSnapshot[o.act](pick(s, o.snaps))
	case o.act == actCreate:
		s.createClaim(pick(s, soakClasses), pick(s, s.nodes))
	default:
		s.t.Fatalf("the soak cannot %s", o.act)
	}
}
