//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// soakStats are the soak's figures, printed at its end. Only the test's
// goroutine touches them.
type soakStats struct {
	started, done  map[string]int
	slowest        map[string]time.Duration
	kills          map[string]int // by component
	killsInFlight  int            // kills made while operations were in flight
	killsSkipped   int            // the component was still coming back
	slowestRecover time.Duration
	checksBy       map[string]int // invariant checks by kind
	checks         int            // full checks of the cluster at rest
	acked, read    int            // acknowledged writes seen; files read back checked
	stuck          int
	leaks          []string
}

func newSoakStats() *soakStats {
	return &soakStats{started: map[string]int{}, done: map[string]int{}, slowest: map[string]time.Duration{},
		kills: map[string]int{}, checksBy: map[string]int{}}
}

func (st *soakStats) began(kind string) { st.started[kind]++ }

func (st *soakStats) finished(kind string, took time.Duration) {
	if strings.HasPrefix(kind, "recover ") {
		st.slowestRecover = max(st.slowestRecover, took)
		return
	}
	st.done[kind]++
	st.slowest[kind] = max(st.slowest[kind], took)
}

func (st *soakStats) killed(component string, inFlight int) {
	st.kills[component]++
	if inFlight > 0 {
		st.killsInFlight++
	}
}

func (st *soakStats) count(check string) { st.checksBy[check]++ }

func (st *soakStats) writes(acked, read int) { st.acked, st.read = st.acked+acked, st.read+read }

func (st *soakStats) leak(what string) { st.leaks = append(st.leaks, what) }

func (st *soakStats) totalKills() int {
	n := 0
	for _, k := range st.kills {
		n += k
	}
	return n
}

// report is the soak's table: operations by kind with the slowest to
// reach its wanted state, kills, checks.
func (st *soakStats) report(cfg soakConfig, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster soak report: seed %d, %s of chaos, %s in all\n", cfg.seed, cfg.duration, took.Round(time.Second))
	fmt.Fprintf(&b, "%-36s %7s %5s %8s\n", "operation", "started", "done", "slowest")
	for _, k := range slices.Sorted(maps.Keys(st.started)) {
		fmt.Fprintf(&b, "%-36s %7d %5d %8s\n", k, st.started[k], st.done[k], st.slowest[k].Round(time.Second))
	}
	fmt.Fprintf(&b, "kills (SIGKILL of the carve container): controller %d, node %d; %d with operations in flight; %d skipped (still coming back); slowest back to ready %s\n",
		st.kills["controller"], st.kills["node"], st.killsInFlight, st.killsSkipped, st.slowestRecover.Round(time.Second))
	fmt.Fprintf(&b, "invariant checks (%d full checks at rest):\n", st.checks)
	for _, k := range slices.Sorted(maps.Keys(st.checksBy)) {
		fmt.Fprintf(&b, "  %-40s %5d\n", k, st.checksBy[k])
	}
	fmt.Fprintf(&b, "acknowledged writes seen: %d; acknowledged files read back and checked: %d; stuck past the deadline (%s): %d; leaked: %d",
		st.acked, st.read, cfg.deadline, st.stuck, len(st.leaks))
	return b.String()
}

// summary is the report's one line.
func (st *soakStats) summary(cfg soakConfig, took time.Duration) string {
	ops, checks := 0, 0
	for _, n := range st.done {
		ops += n
	}
	for _, n := range st.checksBy {
		checks += n
	}
	return fmt.Sprintf("cluster soak: seed %d, %s of chaos (%s in all): %d operations, %d kills (%d controller, %d node; %d with operations in flight), %d invariant checks (%d full), %d acknowledged writes, %d file reads checked, %d stuck, %d leaked",
		cfg.seed, cfg.duration, took.Round(time.Second), ops, st.totalKills(), st.kills["controller"], st.kills["node"],
		st.killsInFlight, checks, st.checks, st.acked, st.read, st.stuck, len(st.leaks))
}
