//go:build vmtest

package lvm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"carve.dev/carve/lvm/runner"
)

// countingRunner counts the commands a Cache's Client runs, and tells
// the environment of the runner it wraps (the Cache reads lvm2's system
// dir from it).
type countingRunner struct {
	r  runner.Runner
	mu sync.Mutex
	n  int
}

func (c *countingRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.r.Run(ctx, name, args...)
}

func (c *countingRunner) LookupEnv(key string) (string, bool) {
	return c.r.(*runner.Exec).LookupEnv(key)
}

func (c *countingRunner) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// settledCache is a Cache over r whose print covers vg's PVs and thin
// pools: a pvs report (as the storage report reads them), then queries
// until a comparison no longer moves the print (a pool the first lvs
// report told of starts one more generation).
func settledCache(t *testing.T, r runner.Runner, query func(*Cache)) (*Cache, *countingRunner) {
	t.Helper()
	runs := &countingRunner{r: r}
	x := NewCache(New(runs), time.Hour)
	if _, err := x.ListVGPVs(context.Background(), Cached, vmVG); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		query(x)
		time.Sleep(printEvery + 100*time.Millisecond)
	}
	return x, runs
}

// A thin pool filled by writes to its thin LV, from outside the Cache,
// shows at the first query after printEvery: the kernel's count of the
// pool's blocks moved, though no LVM metadata did. Unwritten, the pool is
// answered from the report without lvm2. Its first run found the pool at
// 100 % still reported with room for the Cache's max age (10 min).
func TestVMCacheSeesAThinPoolFill(t *testing.T) {
	c, r := vmClient(t)
	ctx := context.Background()
	// lvm2's two ways to lay out an active pool: a pool no thin LV was
	// ever made in is the thin-pool target itself, one used has a -tpool
	// layer under it. The print reads both.
	for _, pool := range []string{"pool0", "fresh"} {
		if _, err := c.CreateThinPool(ctx, vmVG, pool, 64<<20); err != nil {
			t.Fatal(err)
		}
	}
	thin, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "thin1", Size: 32 << 20, ThinPool: "pool0"})
	if err != nil {
		t.Fatal(err)
	}
	p := thinPoolsPrint(vmVG, []string{"fresh", "pool0", "inactive"})
	if !strings.HasPrefix(p, "fresh=data 0/") || !strings.Contains(p, ";pool0=data ") || strings.Contains(p, "inactive") {
		t.Fatalf("thin pools' print %q: want fresh's and pool0's usage, no other", p)
	}
	pool := func(x *Cache) LV {
		t.Helper()
		lv, err := x.GetLV(ctx, Cached, vmVG, "pool0")
		if err != nil {
			t.Fatal(err)
		}
		return lv
	}
	x, runs := settledCache(t, r, func(x *Cache) { pool(x) })
	before, n := pool(x), runs.count()
	time.Sleep(printEvery + 100*time.Millisecond)
	if again := pool(x); runs.count() != n || again.DataPercent != before.DataPercent {
		t.Errorf("unwritten pool: %d lvm2 runs, data %.2f%% then %.2f%%; want none and the same", runs.count()-n, before.DataPercent, again.DataPercent)
	}

	out, err := exec.Command("dd", "if=/dev/urandom", "of="+thin.Path, "bs=1M", "count=8", "oflag=direct", "conv=fsync").CombinedOutput()
	if err != nil {
		t.Fatalf("dd into %s: %v: %s", thin.Path, err, out)
	}
	time.Sleep(printEvery + 100*time.Millisecond)
	after := pool(x)
	if runs.count() == n || after.DataPercent <= before.DataPercent {
		t.Errorf("after 8 MiB written: %d lvm2 runs, data %.2f%% (before %.2f%%); want the pool read again, fuller",
			runs.count()-n, after.DataPercent, before.DataPercent)
	}
	t.Logf("pool0: data %.2f%% -> %.2f%% with %d lvm2 run(s)", before.DataPercent, after.DataPercent, runs.count()-n)
}

// A PV taken out of lvm2's devices file by `lvmdevices --deldev` (no PV
// header moves) shows at the first query after printEvery: lvm2 then
// reports the VG with a PV missing. The VM suite's private lvm.conf has no
// devices file (use_devicesfile = 0); the test turns one on in the
// private system dir's lvmlocal.conf, as RHEL 9 has it, listing both
// disks.
func TestVMCacheSeesAPVTakenOutOfTheDevicesFile(t *testing.T) {
	c, r := vmClient2(t)
	ctx := context.Background()
	dir, disk2 := c.systemDir(), os.Getenv("CARVE_TEST_DISK2")
	if err := os.MkdirAll(filepath.Join(dir, "devices"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"devices/system.devices", "lvmlocal.conf"} {
		content := map[string]string{"lvmlocal.conf": "devices {\n\tuse_devicesfile = 1\n}\n"}[f]
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Before vmClient2's cleanup: lvm2 sees every disk again.
	t.Cleanup(func() { _ = os.Remove(filepath.Join(dir, "lvmlocal.conf")) })
	for _, d := range []string{os.Getenv("CARVE_TEST_DISK"), disk2} {
		if out, err := r.Run(ctx, "lvm", "lvmdevices", "--adddev", d); err != nil {
			t.Fatalf("lvmdevices --adddev %s: %v: %s", d, err, out)
		}
	}
	if vg := vmVGOf(t, c); vg.PVCount != 2 || vg.MissingPVCount != 0 {
		t.Fatalf("with both disks listed lvm2 reports %d PVs, %d missing", vg.PVCount, vg.MissingPVCount)
	}
	missing := func(x *Cache) int {
		t.Helper()
		vg, err := x.GetVG(ctx, Cached, vmVG)
		if err != nil {
			t.Fatal(err)
		}
		return vg.MissingPVCount
	}
	x, runs := settledCache(t, r, func(x *Cache) { missing(x) })
	if x.lvmDir != dir {
		t.Fatalf("the Cache reads lvm2's files in %q, its lvm2 in %q", x.lvmDir, dir)
	}
	n := runs.count()
	time.Sleep(printEvery + 100*time.Millisecond)
	if m := missing(x); m != 0 || runs.count() != n {
		t.Errorf("unchanged: %d PVs missing after %d lvm2 runs; want 0 and none", m, runs.count()-n)
	}

	if out, err := r.Run(ctx, "lvm", "lvmdevices", "--yes", "--deldev", disk2); err != nil {
		t.Fatalf("lvmdevices --deldev %s: %v: %s", disk2, err, out)
	}
	time.Sleep(printEvery + 100*time.Millisecond)
	if m := missing(x); m != 1 {
		t.Errorf("after lvmdevices --deldev %s: the cached VG has %d PVs missing, want 1", disk2, m)
	}
}
