package soakmodel

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Stats are a soak's figures, printed at its end: operations by kind,
// kills, checks, writes acknowledged and read back, stuck operations,
// leaks, and the driver's own figures (Count, Longest). Safe for
// concurrent use (test/soak's workers).
type Stats struct {
	mu            sync.Mutex
	started, done map[string]int
	slowest       map[string]time.Duration
	tries         map[string]int // attempts of a driver's calls (CSI calls)
	slowestTry    map[string]time.Duration
	kills         map[string]int // by what was killed, or when
	killsInFlight int
	counts        map[string]int
	longest       map[string]time.Duration
	checks        int            // full checks of everything at rest
	checksBy      map[string]int // invariant checks by kind
	acked, read   int
	stuck         int
	leaks         []string
	figureOrder   []string
}

func NewStats() *Stats {
	return &Stats{started: map[string]int{}, done: map[string]int{}, slowest: map[string]time.Duration{},
		tries: map[string]int{}, slowestTry: map[string]time.Duration{}, kills: map[string]int{},
		counts: map[string]int{}, longest: map[string]time.Duration{}, checksBy: map[string]int{}}
}

func (s *Stats) locked(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// Began counts an operation started.
func (s *Stats) Began(kind string) { s.locked(func() { s.started[kind]++ }) }

// Done counts an operation that reached its wanted state, took after it
// began.
func (s *Stats) Done(kind string, took time.Duration) {
	s.locked(func() { s.done[kind]++; s.slowest[kind] = max(s.slowest[kind], took) })
}

// Try records one attempt of a call.
func (s *Stats) Try(kind string, took time.Duration) {
	s.locked(func() { s.tries[kind]++; s.slowestTry[kind] = max(s.slowestTry[kind], took) })
}

// Kill counts a kill of kind, made while inFlight operations were under
// way.
func (s *Stats) Kill(kind string, inFlight int) {
	s.locked(func() {
		s.kills[kind]++
		if inFlight > 0 {
			s.killsInFlight++
		}
	})
}

// Count adds one to the driver's figure name.
func (s *Stats) Count(name string) {
	s.locked(func() {
		if _, ok := s.counts[name]; !ok {
			s.figureOrder = append(s.figureOrder, name)
		}
		s.counts[name]++
	})
}

// Longest records d under the driver's figure name, if the longest.
func (s *Stats) Longest(name string, d time.Duration) {
	s.locked(func() {
		if _, ok := s.longest[name]; !ok {
			s.figureOrder = append(s.figureOrder, name)
		}
		s.longest[name] = max(s.longest[name], d)
	})
}

// Checked counts an invariant check of kind.
func (s *Stats) Checked(kind string) { s.locked(func() { s.checksBy[kind]++ }) }

// FullCheck counts a check of everything at rest.
func (s *Stats) FullCheck() { s.locked(func() { s.checks++ }) }

// Writes adds acknowledged writes seen and files read back and checked.
func (s *Stats) Writes(acked, read int) { s.locked(func() { s.acked += acked; s.read += read }) }

// Stuck counts an operation stuck past its deadline.
func (s *Stats) Stuck() { s.locked(func() { s.stuck++ }) }

func (s *Stats) Leak(what string) { s.locked(func() { s.leaks = append(s.leaks, what) }) }

// Leaked is the number of leaks.
func (s *Stats) Leaked() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.leaks)
}

func sum[V int | time.Duration](m map[string]V) V {
	var n V
	for _, v := range m {
		n += v
	}
	return n
}

func (s *Stats) killsLine() string {
	var by []string
	for _, k := range slices.Sorted(maps.Keys(s.kills)) {
		by = append(by, fmt.Sprintf("%s %d", k, s.kills[k]))
	}
	return fmt.Sprintf("%d kills (%s; %d with operations in flight)", sum(s.kills), strings.Join(by, ", "), s.killsInFlight)
}

// Report is the soak's table (title: which soak).
func (s *Stats) Report(title string, cfg Config, took time.Duration, triesOf string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s report: seed %d, %s of chaos, %s in all\n", title, cfg.Seed, cfg.Duration, took.Round(time.Second))
	fmt.Fprintf(&b, "%-40s %7s %5s %8s\n", "operation", "started", "done", "slowest")
	for _, k := range slices.Sorted(maps.Keys(s.started)) {
		fmt.Fprintf(&b, "%-40s %7d %5d %8s\n", k, s.started[k], s.done[k], s.slowest[k].Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "%-40s %7d %5d\n", "total", sum(s.started), sum(s.done))
	if len(s.tries) > 0 {
		fmt.Fprintf(&b, "%-40s %7s %14s\n", triesOf, "tries", "slowest")
		for _, k := range slices.Sorted(maps.Keys(s.tries)) {
			fmt.Fprintf(&b, "%-40s %7d %14s\n", k, s.tries[k], s.slowestTry[k].Round(time.Millisecond))
		}
	}
	fmt.Fprintf(&b, "%s\n", s.killsLine())
	var figures []string
	for _, name := range s.figureOrder {
		if d, ok := s.longest[name]; ok {
			figures = append(figures, fmt.Sprintf("%s: %s", name, d.Round(time.Second)))
		} else {
			figures = append(figures, fmt.Sprintf("%s: %d", name, s.counts[name]))
		}
	}
	if len(figures) > 0 {
		fmt.Fprintf(&b, "%s\n", strings.Join(figures, "; "))
	}
	fmt.Fprintf(&b, "invariant checks (%d full checks at rest):\n", s.checks)
	for _, k := range slices.Sorted(maps.Keys(s.checksBy)) {
		fmt.Fprintf(&b, "  %-40s %5d\n", k, s.checksBy[k])
	}
	fmt.Fprintf(&b, "acknowledged writes: %d; acknowledged files read back and checked: %d; stuck past the deadline (%s): %d; leaked: %d",
		s.acked, s.read, cfg.Deadline, s.stuck, len(s.leaks))
	for _, l := range s.leaks {
		fmt.Fprintf(&b, "\n  leaked: %s", l)
	}
	return b.String()
}

// Summary is the report's one line.
func (s *Stats) Summary(title string, cfg Config, took time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%s: seed %d, %s of chaos (%s in all): %d operations, %s, %d invariant checks (%d full), %d acknowledged writes, %d file reads checked, %d stuck, %d leaked",
		title, cfg.Seed, cfg.Duration, took.Round(time.Second), sum(s.done), s.killsLine(), sum(s.checksBy), s.checks,
		s.acked, s.read, s.stuck, len(s.leaks))
}
