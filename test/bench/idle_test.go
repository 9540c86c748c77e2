//go:build bench

package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/test/bench/results"
)

// capacityPeriod is how often csi-provisioner's capacity tracking asks
// GetCapacity per storage class (its default --capacity-poll-interval).
const capacityPeriod = time.Minute

// idle counts the lvm2 runs carve makes over cfg.idle while nothing
// changes, the volumes of the scale ladder present, and the bench asks
// GetCapacity once a minute for the thick and the thin class, as capacity
// tracking does. Anything above zero is reading what did not change.
func (e *env) idle(volumes int) {
	ctx := context.Background()
	before := e.scrape()
	start := time.Now()
	calls := 0
	for tick := time.Duration(0); tick < e.cfg.idle; tick += capacityPeriod {
		time.Sleep(time.Until(start.Add(tick)))
		for _, thin := range []bool{false, true} {
			_, err := e.c.Controller.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: params(thin)})
			e.must(wrap("GetCapacity", err))
			calls++
		}
	}
	time.Sleep(time.Until(start.Add(e.cfg.idle)))
	d := e.scrape().minus(before)
	window := time.Since(start)
	idle := &results.Idle{Volumes: volumes, Window: window, CapacityCalls: calls, Commands: map[string]int{}}
	for k, v := range d.runs {
		if results.IsLVM(k) {
			idle.Commands[k] = int(v)
		}
	}
	idle.PerMinute = float64(results.LVMRuns(d.runs)) / window.Minutes()
	e.res.Idle = idle
	e.res.Rows = append(e.res.Rows, results.Row{Section: "idle",
		Op:   fmt.Sprintf("lvm runs per minute, %d volumes, %d GetCapacity calls in %s", volumes, calls, window.Round(time.Second)),
		Unit: "/min", Carve: idle.PerMinute, Goal: results.Goal{Of: "carve", Op: "<=", Value: 0},
		Commands: floatCounts(idle.Commands)})
	e.t.Logf("idle: %.1f lvm runs per minute over %s (%v)", idle.PerMinute, window.Round(time.Second), idle.Commands)
}

func floatCounts(m map[string]int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = float64(v)
	}
	return out
}
