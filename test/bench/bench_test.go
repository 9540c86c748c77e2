//go:build bench

// Package bench measures `carve standalone` against the same work done
// with raw lvm2 and filesystem commands, on one VG in the test VM
// (scripts/bench.sh): provisioning, attach and the node path, snapshots,
// the data path, scale and idle cost. Absolute times drift on a shared,
// software-emulated machine; ratios of runs that take turns on the same
// VG hold, so each figure is a median of interleaved samples. It prints
// and records figures and asserts no speed: a failed call fails it.
// docs/performance.md describes the method; test/bench/report prints the
// table and draws the plots from results.json.
package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"carve.dev/carve/test/bench/results"
)

func TestBench(t *testing.T) {
	cfg := loadConfig(t)
	e := setup(t, cfg)
	e.res.Kernel = kernel()
	out := filepath.Join(cfg.out, "results.json")
	// The file is rewritten after each section, so that a run stopped
	// half way still leaves what it measured.
	section := func(name string, fn func()) {
		t.Run(name, func(t *testing.T) {
			e.t = t
			start := time.Now()
			fn()
			t.Logf("%s took %s", name, time.Since(start).Round(time.Second))
		})
		e.t = t
		e.res.Duration = time.Since(e.res.Started)
		if err := results.Write(out, e.res); err != nil {
			t.Fatal(err)
		}
	}
	section("provisioning", e.provisioning)
	section("attach", e.attach)
	section("node", func() { e.nodePath("ext4"); e.nodePath("xfs") })
	section("snapshots", func() { e.thinSnapshots(); e.thickCopy() })
	section("datapath", e.dataPath)
	section("lvmd", e.lvmdSection)
	var st *scaleState
	section("scale", func() { st = e.scale(); e.scaleRows() })
	section("idle", func() {
		if st == nil {
			e.t.Skip("no scale ladder ran")
		}
		e.idle(len(st.ids))
	})
	t.Logf("results: %s", out)
}

// kernel is the VM's kernel release, for the record.
func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
