//go:build vmtest

// Package soak is chaos under load, on real LVM in the test VM: for a fixed
// time, workers make random CSI calls as a CO would (CreateVolume,
// DeleteVolume, CreateSnapshot, DeleteSnapshot, restores, controller and
// node expansion, ControllerPublish/Unpublish, NodeStage/Unstage,
// NodePublish/Unpublish) across thick, thin, striped and raid1 volumes, and
// write checksummed files through the mounts, while `carve standalone` is
// SIGKILLed at random moments, both in the middle of calls and between
// them, and started again. In standalone mode one process serves both what
// cluster mode splits into `carve controller` and `carve node`, so killing
// it kills both. The kill takes its process group, as a container runtime
// or systemd does: an lvm or mkfs command it ran dies with it.
//
// A call cut by a kill is made again, the same request, until it succeeds
// or ends with a final error, as a CO retries. Every call has a deadline;
// one that runs out without a kill in between counts as stuck, a failure.
//
// Invariants, checked every CARVE_SOAK_CHECK_EVERY while no call is in
// flight, and at the end:
//   - every write acknowledged by fsync reads back with its checksum, on
//     its volume and on volumes restored from snapshots taken after it (a
//     restore holds exactly the files of its snapshot);
//   - LVM holds exactly the model's volumes and snapshots, with their sizes,
//     layouts and activation (active exactly while published to the node),
//     and nothing else: no leaked LV, frozen point or COW, no intent tag
//     (pending, deleting, copying) once calls settled; Carve's ListVolumes
//     and ListSnapshots agree;
//   - the mounts under the test directory are the model's staging and
//     target paths, no more;
//   - capacity is exact: the VG's free space is its base less the model's
//     volumes' and thick snapshots' footprints, and GetCapacity for each
//     layout is what the capacity rules make of LVM's state (thin:
//     bounded, see checkCapacity);
//   - no call stuck past its deadline, and no read or write of a volume's
//     files either (a device left suspended blocks them for good: the
//     soak says so with the device-mapper state, see watchIO).
//
// At the end every volume is brought up and its files read, then every
// volume and snapshot is deleted, and the VG must be back to its base.
//
// What the soak believes (volumes, snapshots, acknowledged writes, the LVs
// and free space they imply), the checks' verdicts, the figures and the
// seeded choices are test/soakmodel's, which the e2e's cluster soak drives
// too; this package is its CSI driver: the calls, the kills of one
// process, and the reads of LVM, the mounts and the files on this host.
//
// Knobs: CARVE_SOAK_DURATION (default 90s), CARVE_SOAK_SEED (default: the
// clock; printed, and a run with the same seed makes the same choices, though
// the interleaving of workers and kills follows timing), CARVE_SOAK_WORKERS
// (3), CARVE_SOAK_CHECK_EVERY (20s), CARVE_SOAK_KILL_EVERY (mean time
// between kills, 10s), CARVE_SOAK_CALL_DEADLINE (2m).
package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"carve.dev/carve/lvm"
	"carve.dev/carve/test/soakmodel"
	"carve.dev/carve/test/testenv"
)

const (
	vg   = "soakvg"
	node = "soak-node"
	pool = "pool"
	mib  = 1 << 20
	// poolSize is the thin pool's; the thick volumes stay below
	// thickBudget, so that raid1 and striped legs always find room on
	// both PVs whatever lvm2 put where.
	poolSize    = 1024 * mib
	thickBudget = 2048 * mib
)

// config is the soak's knobs: soakmodel's, and its workers.
type config struct {
	soakmodel.Config
	workers int
}

// callGuard is a call's deadline, a hang guard: the slowest call of a
// quiet run (a thick snapshot's copy) takes well under a minute, and in a
// cold run the VM's core is shared with builds and a second VM (measured:
// suites ran two to three times slower), which must make calls later,
// never stuck.
const callGuard = 5 * time.Minute

func readConfig(t *testing.T) config {
	t.Helper()
	mc, err := soakmodel.ReadConfig(os.Getenv, "CARVE_SOAK_", "CARVE_SOAK_CALL_DEADLINE", soakmodel.Config{Duration: 90 * time.Second,
		CheckEvery: 20 * time.Second, KillEvery: 10 * time.Second, Deadline: callGuard})
	if err != nil {
		t.Fatal(err)
	}
	c := config{Config: mc, workers: 3}
	if s := os.Getenv("CARVE_SOAK_WORKERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CARVE_SOAK_WORKERS=%q: want a positive integer", s)
		}
		c.workers = n
	}
	return c
}

func TestSoak(t *testing.T) {
	bin := testenv.Bin(t) // resolved once: the soak restarts carve after each kill
	cfg := readConfig(t)
	if cfg.Duration == 0 {
		t.Skip("CARVE_SOAK_DURATION=0")
	}
	disks := []string{testenv.Disk(t, "CARVE_TEST_DISK"), testenv.Disk(t, "CARVE_TEST_DISK2")}
	l := testenv.PrivateLVM(t)
	testenv.NewVG(t, l, vg, disks...)
	ctx := context.Background()
	if _, err := l.CreateThinPool(ctx, vg, pool, poolSize); err != nil {
		t.Fatal(err)
	}
	base, err := l.GetVG(ctx, vg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{"staging", "target"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := newSoak(t, cfg, l, bin, dir, base)
	t.Cleanup(func() {
		s.carve.stop()
		testenv.UnmountAll(t, dir, 0)
		removeAll(t, l)
	})
	t.Logf("soak: seed %d (CARVE_SOAK_SEED=%d repeats its choices), %s, %d workers, a kill every %s on average, checks every %s",
		cfg.Seed, cfg.Seed, cfg.Duration, cfg.workers, cfg.KillEvery, cfg.CheckEvery)
	start := time.Now()
	s.run()
	s.finish()
	t.Log(s.stats.Report(fmt.Sprintf("soak (%d workers)", cfg.workers), cfg.Config, time.Since(start), "CSI call"))
	t.Log(s.stats.Summary("soak", cfg.Config, time.Since(start)))
	if s.stats.Leaked() != 0 {
		t.Errorf("%d leaked objects", s.stats.Leaked())
	}
	// Once more, last: a failure is reported as it happens, minutes of log
	// before the end, where a CI excerpt of the end does not reach.
	if s.hasFailed() {
		s.stopMu.Lock()
		defer s.stopMu.Unlock()
		t.Logf("soak failures (seed %d):\n\t%s", cfg.Seed, strings.Join(s.failed, "\n\t"))
	}
}

// removeAll removes every LV but the pool left by a failed run, snapshots
// and frozen points first: lvm2 will not remove an origin that has them.
func removeAll(t *testing.T, l *lvm.Client) {
	t.Helper()
	ctx := context.Background()
	for range 3 {
		lvs, err := l.ListLVs(ctx, vg)
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		left := 0
		for _, lv := range lvs {
			if lv.Name != pool {
				left++
				_ = l.RemoveLV(ctx, vg, lv.Name)
			}
		}
		if left == 0 {
			return
		}
	}
	t.Logf("cleanup: LVs left in %s", vg)
}

func fmtMiB(b int64) string { return fmt.Sprintf("%d MiB", b/mib) }
