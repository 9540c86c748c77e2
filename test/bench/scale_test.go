//go:build bench

package bench

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/test/bench/results"
	"carve.dev/carve/test/csiflow"
)

// scaleSize is the scale ladder's volume size, one extent: what is
// measured is the number of volumes, not their bytes.
const scaleSize = 4 * mib

// Names of the scale section's operations, as results and plots show them.
const (
	opCreate       = "CreateVolume"
	opCapThick     = "GetCapacity thick"
	opCapThin      = "GetCapacity thin"
	opListPage     = "ListVolumes page of 100"
	opListAll      = "ListVolumes whole"
	opGetVolume    = "ControllerGetVolume"
	opStats        = "NodeGetVolumeStats"
	opRawLVs       = "lvs (raw)"
	fillParallel   = 4
	listPageLength = 100
)

// scaleState is what the ladder keeps from one count to the next.
type scaleState struct {
	ids       []string        // every volume made, the published one first
	published *csiflow.Volume // mounted, for NodeGetVolumeStats
	target    string
}

// scale grows the VG to each count of the ladder and measures the read
// calls and CreateVolume there, and carve's memory. The volumes stay, for
// the idle count after it.
func (e *env) scale() *scaleState {
	ctx := context.Background()
	v, err := e.create(ctx, e.name("scale"), 64*mib, false, "ext4")
	e.must(err)
	st := &scaleState{published: v, target: e.path("scale-target")}
	// Volumes an earlier section left (it failed) count too.
	resp, err := e.c.Controller.ListVolumes(ctx, &csi.ListVolumesRequest{})
	e.must(err)
	for _, en := range resp.GetEntries() {
		st.ids = append(st.ids, en.GetVolume().GetVolumeId())
	}
	e.must(v.Up(ctx, node, e.path("scale-staging"), st.target))
	// Unmounted after the idle count, before the test's directories are
	// removed (cleanups run last registered first), while carve still runs.
	t := e.top
	t.Cleanup(func() {
		if err := v.Down(context.Background(), st.target); err != nil {
			t.Errorf("unmount the scale ladder's published volume: %v", err)
		}
	})
	for _, n := range e.cfg.scale {
		e.scalePoint(st, n)
	}
	return st
}

// scalePoint brings the volume count to n, the last scaleSamples of them
// (or as many as the step adds) made one at a time and timed, then times
// each read call scaleSamples times, the calls taking turns.
func (e *env) scalePoint(st *scaleState, n int) {
	start := time.Now()
	fill := max(0, n-len(st.ids)-e.cfg.scaleSamples)
	e.fillVolumes(st, fill)
	samples := map[string][]float64{}
	for len(st.ids) < n {
		var id string
		samples[opCreate] = append(samples[opCreate], e.timed(func() (err error) {
			id, err = e.scaleVolume(context.Background())
			return err
		}))
		st.ids = append(st.ids, id)
	}
	for range e.cfg.scaleSamples {
		for _, op := range e.readOps(st) {
			samples[op.name] = append(samples[op.name], e.timed(op.call))
		}
	}
	p := results.ScalePoint{N: len(st.ids), Ops: map[string]results.Latency{}, RSSBytes: e.rss(),
		Commands: e.commandsPerRead(st)}
	for name, s := range samples {
		p.Ops[name] = results.Summarize(s)
	}
	e.res.Scale = append(e.res.Scale, p)
	e.t.Logf("scale %d volumes (step took %s): RSS %d MiB", p.N, time.Since(start).Round(time.Second), p.RSSBytes>>20)
	for _, name := range slices.Sorted(maps.Keys(p.Ops)) {
		e.t.Logf("  %-26s p50 %7.3f s  p99 %7.3f s  commands %s", name, p.Ops[name].P50, p.Ops[name].P99, describe(p.Commands[name]))
	}
}

// fillVolumes creates n volumes, fillParallel at a time: the ladder's
// bulk, not timed.
func (e *env) fillVolumes(st *scaleState, n int) {
	var mu sync.Mutex
	next := make(chan struct{})
	go func() {
		defer close(next)
		for range n {
			next <- struct{}{}
		}
	}()
	e.must(batch(fillParallel, func() error {
		for range next {
			id, err := e.scaleVolume(context.Background())
			if err != nil {
				return err
			}
			mu.Lock()
			st.ids = append(st.ids, id)
			mu.Unlock()
		}
		return nil
	}))
}

func (e *env) scaleVolume(ctx context.Context) (string, error) {
	v, err := e.create(ctx, e.name("scale"), scaleSize, false, "")
	if err != nil {
		return "", err
	}
	return v.ID, nil
}

// commandsPerRead calls each read once more, untimed, and counts the
// commands carve ran for it: what a read costs in lvm2 runs.
func (e *env) commandsPerRead(st *scaleState) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, op := range e.readOps(st) {
		if op.name == opRawLVs {
			continue
		}
		before := e.scrape()
		e.must(op.call())
		out[op.name] = e.scrape().minus(before).runs
	}
	return out
}

type readOp struct {
	name string
	call func() error
}

// readOps are the calls a CO makes while volumes exist (capacity
// tracking, the attacher's and the health monitor's lists, kubelet's
// stats), and lvm2's own report of the VG for reference.
func (e *env) readOps(st *scaleState) []readOp {
	ctx := context.Background()
	cc := e.c.Controller
	capacity := func(thin bool) func() error {
		return func() error {
			_, err := cc.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: params(thin)})
			return wrap("GetCapacity", err)
		}
	}
	list := func(max int32, want int) func() error {
		return func() error {
			resp, err := cc.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: max})
			if err == nil && len(resp.GetEntries()) != want {
				err = fmt.Errorf("%d entries, want %d", len(resp.GetEntries()), want)
			}
			return wrap("ListVolumes", err)
		}
	}
	return []readOp{
		{opCapThick, capacity(false)},
		{opCapThin, capacity(true)},
		{opListPage, list(listPageLength, min(listPageLength, len(st.ids)))},
		{opListAll, list(0, len(st.ids))},
		{opGetVolume, func() error {
			id := st.ids[rand.IntN(len(st.ids))]
			_, err := cc.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id})
			return wrap("ControllerGetVolume "+id, err)
		}},
		{opStats, func() error {
			_, err := e.c.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: st.published.ID, VolumePath: st.target})
			return wrap("NodeGetVolumeStats", err)
		}},
		{opRawLVs, func() error { return e.lvmCmd(ctx, "lvs", vg) }},
	}
}

func wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// scaleRows puts the largest count's figures in the table: reads against
// the goal of 50 ms a call, beside one raw lvs of the VG; RSS against 64 MiB.
func (e *env) scaleRows() {
	if len(e.res.Scale) == 0 {
		return
	}
	p := e.res.Scale[len(e.res.Scale)-1]
	lvs := p.Ops[opRawLVs].P50
	for _, op := range []string{opCapThick, opCapThin, opListPage, opListAll, opGetVolume, opStats, opCreate} {
		l, ok := p.Ops[op]
		if !ok {
			continue
		}
		row := results.Row{Section: "scale", Op: fmt.Sprintf("%s p50 at %d volumes (p99 %.3f s)", op, p.N, l.P99), Unit: "s",
			Raw: lvs, Carve: l.P50, Commands: p.Commands[op], Note: "raw: one lvs of the VG, for reference"}
		if op != opCreate {
			row.Goal = results.Goal{Of: "carve", Op: "<", Value: 0.05}
		}
		e.res.Rows = append(e.res.Rows, row)
	}
	e.res.Rows = append(e.res.Rows, results.Row{Section: "scale", Op: fmt.Sprintf("carve RSS at %d volumes", p.N), Unit: "MiB",
		Carve: float64(p.RSSBytes) / mib, Goal: results.Goal{Of: "carve", Op: "<", Value: 64}})
}
