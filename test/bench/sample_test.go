//go:build bench

package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"carve.dev/carve/test/bench/results"
)

// pairs runs raw then Carve, reps times, so that drift on the shared
// machine hits both alike, and returns each one's samples. Each function
// returns its sample (seconds, or MiB/s) and fails the test itself.
func (e *env) pairs(reps int, raw, carve func() float64) (r, c []float64) {
	e.turns(reps, func() { r = append(r, raw()) }, func() { c = append(c, carve()) })
	return r, c
}

// turns runs fns one after the other, reps rounds: raw, Carve, lvmd,
// raw, Carve, lvmd... Each keeps its own samples.
func (e *env) turns(reps int, fns ...func()) {
	for range reps {
		for _, fn := range fns {
			fn()
		}
	}
}

// timed is the wall time of fn in seconds; an error fails the test.
func (e *env) timed(fn func() error) float64 {
	e.t.Helper()
	start := time.Now()
	err := fn()
	d := time.Since(start).Seconds()
	e.must(err)
	return d
}

// cmdsPerOp keeps the commands Carve ran for one sample: a row shows
// what its figure is made of.
type cmdsPerOp struct{ last counters }

// carveTimed is timed, with carve's commands counted around it (outside
// the timed part) and kept in k.
func (e *env) carveTimed(k *cmdsPerOp, fn func() error) float64 {
	e.t.Helper()
	before := e.scrape()
	d := e.timed(fn)
	k.last = e.scrape().minus(before)
	return d
}

// add completes row with its medians and records it.
func (e *env) add(row results.Row, k *cmdsPerOp) {
	row.Raw, row.Carve, row.Wipe = results.Median(row.RawS), results.Median(row.CarveS), results.Median(row.WipeS)
	if k != nil {
		row.Commands = k.last.runs
	}
	row.LVMD = results.Median(row.LVMDS)
	e.res.Rows = append(e.res.Rows, row)
	e.t.Logf("%-60s raw %8.3f  carve %8.3f %-5s ratio %.2f  commands %s", row.Op, row.Raw, row.Carve, row.Unit, row.Ratio(), describe(row.Commands))
}

// describe renders command counts as "lvs=3 lvcreate=1".
func describe(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%g", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// ratioGoal is a goal on Carve/raw.
func ratioGoal(op string, v float64) results.Goal { return results.Goal{Of: "ratio", Op: op, Value: v} }
