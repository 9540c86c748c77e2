//go:build vmtest

package soak

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// stats are the run's figures, printed at the end.
type stats struct {
	mu               sync.Mutex
	ops              map[string]int
	calls            map[string]int
	slowest          map[string]time.Duration
	killsMid         int
	killsBetween     int
	retriedAfterKill int
	aborted          int
	unavailable      int
	stuck            int
	checks           int
	written          int
	verified         int
	leaks            []string
}

func newStats() *stats {
	return &stats{ops: map[string]int{}, calls: map[string]int{}, slowest: map[string]time.Duration{}}
}

func (s *stats) count(n *int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*n++
}

func (s *stats) op(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops[kind]++
}

// latency records one attempt of a CSI call.
func (s *stats) latency(kind string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[kind]++
	s.slowest[kind] = max(s.slowest[kind], d)
}

func (s *stats) leak(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaks = append(s.leaks, what)
}

func (s *stats) leaked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.leaks)
}

func (s *stats) report(cfg config, took time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "soak report: seed %d, %s of chaos (%s with the final checks), %d workers\n", cfg.seed, cfg.duration,
		took.Round(time.Second), cfg.workers)
	total := 0
	fmt.Fprintf(&b, "%-40s %6s\n", "operation", "done")
	for _, k := range sortedKeys(s.ops) {
		fmt.Fprintf(&b, "%-40s %6d\n", k, s.ops[k])
		total += s.ops[k]
	}
	fmt.Fprintf(&b, "%-40s %6d\n", "total", total)
	fmt.Fprintf(&b, "%-40s %6s %8s\n", "CSI call", "tries", "slowest")
	for _, k := range sortedKeys(s.calls) {
		fmt.Fprintf(&b, "%-40s %6d %8s\n", k, s.calls[k], s.slowest[k].Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "kills: %d (%d with calls in flight, %d between calls); calls made again after a kill: %d; ABORTED answers: %d; UNAVAILABLE with no kill: %d\n",
		s.killsMid+s.killsBetween, s.killsMid, s.killsBetween, s.retriedAfterKill, s.aborted, s.unavailable)
	fmt.Fprintf(&b, "writes acknowledged: %d; file reads checked: %d; invariant checks: %d; calls stuck past the deadline (%s): %d\n",
		s.written, s.verified, s.checks, cfg.deadline, s.stuck)
	fmt.Fprintf(&b, "leaked objects: %d", len(s.leaks))
	for _, l := range s.leaks {
		fmt.Fprintf(&b, "\n  leaked: %s", l)
	}
	return b.String()
}
