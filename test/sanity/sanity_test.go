//go:build vmtest

// Package sanity runs the kubernetes-csi sanity suite against `carve
// standalone` on a real volume group, with real mkfs and mounts. It runs as
// root inside the test VM (scripts/test-vm.sh). Ginkgo runs a suite once per
// process, so each Test here is its own run of the test binary.
package sanity

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"

	"carve.dev/carve/test/fixture"
	"carve.dev/carve/test/testenv"
)

const (
	vg   = "sanityvg"
	pool = "pool"
)

// Thick volumes, mounted: snapshots are copies made through a frozen point.
// Always the whole suite.
func TestSanityMount(t *testing.T) { runSanity(t, "mount", false, "", wholeSuite) }

// Thick volumes, raw block. What block adds to the mount run is the node
// side: staging and publishing a device file, its stats and expansion. The
// controller specs run with it only in a full run. csi-sanity v5.6.0 has
// 27 `Node Service` specs, and Carve passes them all.
func TestSanityBlock(t *testing.T) {
	runSanity(t, "block", false, `Node Service`, specCounts{Ran: 27, Passed: 27, Pending: 1})
}

// Thin volumes in a thin pool, mounted: snapshots and clones are instant.
// What thin adds is the controller side (carving in the pool, thin
// snapshots and clones, expansion within the pool); its node side is the
// mount run's. csi-sanity v5.6.0 has 66 `[Controller Server]` specs, the
// two that skip themselves among them.
func TestSanityThin(t *testing.T) {
	runSanity(t, "mount", true, `\[Controller Server\]`, specCounts{Ran: 66, Passed: 64, Skipped: 2, Pending: 1})
}

// specCounts is how a run of csi-sanity ends, counted over its specs:
// those it ran (matching the focus), and of them those that passed and
// those that skipped themselves; those pending (the suite's own XIt,
// reported in every run); those that failed. runSanity compares the run's
// with what it must be, so that a spec that no longer runs, or skips
// where it passed, fails the test as a failed spec does (Ginkgo passes a
// run whose specs skip).
type specCounts struct{ Ran, Passed, Skipped, Pending, Failed int }

// wholeSuite is a run of the whole suite (csi-sanity v5.6.0: 103 specs):
// every spec runs but the pending one; two skip themselves, each a
// capability Carve does not offer (test/README.md: PUBLISH_READONLY,
// SNAPSHOT_ACCESSIBILITY_CONSTRAINTS); the other 100 pass.
var wholeSuite = specCounts{Ran: 102, Passed: 100, Skipped: 2, Pending: 1}

// report is csi-sanity's report of the run, which Ginkgo hands over when
// the suite ends (within sanity.Test).
var report *types.Report

var _ = ginkgo.ReportAfterSuite("carve: spec counts", func(r types.Report) { report = &r })

// countSpecs counts the report's specs (its It nodes). A spec left out by
// the focus is reported skipped with no message; one that skipped itself
// (ginkgo.Skip) carries the reason it gave.
func countSpecs(r *types.Report) specCounts {
	var n specCounts
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		switch {
		case s.State == types.SpecStatePending:
			n.Pending++
		case s.State == types.SpecStateSkipped && s.Failure.Message == "":
			// Not focused: not run.
		case s.State == types.SpecStateSkipped:
			n.Ran++
			n.Skipped++
		case s.State == types.SpecStatePassed:
			n.Ran++
			n.Passed++
		default:
			n.Ran++
			n.Failed++
		}
	}
	return n
}

// CARVE_SANITY_FULL=1 (make test-vm-full) runs every configuration's whole
// suite instead of only what it adds to the mount run.
var fullRuns = os.Getenv("CARVE_SANITY_FULL") == "1"

// runSanity runs csi-sanity once. focus, unless empty or a full run is
// asked for, limits the run to the specs matching it (Ginkgo's focus: a
// regexp over the suite's description, a space and the spec's full text,
// so it cannot be anchored to the spec's start).
func runSanity(t *testing.T, accessType string, thin bool, focus string, want specCounts) {
	if focus == "" || fullRuns {
		want = wholeSuite
	}
	if focus != "" && !fullRuns {
		// Ginkgo binds its flags to the test binary's command line and reads
		// them when the suite starts.
		// fail-on-empty: a focus that matches nothing must fail the run,
		// not pass it with every spec skipped.
		for name, value := range map[string]string{"ginkgo.focus": focus, "ginkgo.fail-on-empty": "true"} {
			if err := flag.Set(name, value); err != nil {
				t.Fatalf("focusing the suite: -%s: %v", name, err)
			}
		}
		t.Logf("running only the specs matching %q (CARVE_SANITY_FULL=1 runs all)", focus)
	}
	disks := []string{testenv.Disk(t, "CARVE_TEST_DISK")}
	// The ModifyVolume specs change the mutable parameters of a volume
	// made without them, and make one with them: thick volumes turn raid1
	// (a second leg, on a second PV) for real. Thin volumes take no legs,
	// so for them the specs ask for the none they have.
	mutable := map[string]string{"mirrors": "0"}
	if !thin {
		if d := os.Getenv("CARVE_TEST_DISK2"); d != "" {
			disks = append(disks, d)
			mutable["mirrors"] = "1"
		} else if fixture.Required() {
			fixture.Missing(t, "CARVE_TEST_DISK2 is not set: the thick runs' ModifyVolume specs turn volumes raid1, on a second PV")
		}
	}
	c := testenv.PrivateLVM(t)
	testenv.NewVG(t, c, vg, disks...)
	params := map[string]string{"volumeGroup": vg, "fsType": "ext4"}
	if thin {
		if _, err := c.CreateThinPool(context.Background(), vg, pool, 1<<30); err != nil {
			t.Fatal(err)
		}
		params["thinPool"] = pool
	}
	endpoint := testenv.StartCarve(t, testenv.Options{}, "--volume-groups="+vg, "--node-id=sanity-node", "--max-volumes=3",
		"--thin-overprovision-ratio=4").Endpoint

	cfg := sanity.NewTestConfig()
	cfg.Address = endpoint
	dir := t.TempDir()
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	// Small volumes keep the wipe on delete, copies and mkfs quick in the
	// VM; ext4 has no practical minimum.
	cfg.TestVolumeSize = 16 << 20
	cfg.TestVolumeExpandSize = 32 << 20
	cfg.TestVolumeAccessType = accessType
	cfg.TestVolumeParameters = params
	cfg.TestVolumeMutableParameters = mutable
	cfg.IdempotentCount = 2
	cfg.TestNodeVolumeAttachLimit = true
	sanity.Test(t, cfg)

	if report == nil {
		t.Fatal("csi-sanity ended without its report: no spec counts to check")
	}
	got := countSpecs(report)
	t.Logf("csi-sanity: %d specs ran, %d passed, %d skipped themselves, %d pending, %d failed", got.Ran, got.Passed, got.Skipped, got.Pending, got.Failed)
	if got != want {
		t.Errorf("csi-sanity's counts are %+v, want %+v: a spec that no longer runs or now skips fails the run as a failure does (test/README.md, csi-sanity)", got, want)
	}
}
