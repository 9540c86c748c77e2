//go:build vmtest

// Package sanity runs the kubernetes-csi sanity suite against `carve
// standalone` on a real volume group, with real mkfs and mounts. It runs as
// root inside the test VM (scripts/test-vm.sh). Ginkgo runs a suite once per
// process, so each Test here is its own run of the test binary.
package sanity

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"

	"carve.dev/carve/test/testenv"
)

const (
	vg   = "sanityvg"
	pool = "pool"
)

// Thick volumes, mounted: snapshots are copies made through a frozen point.
func TestSanityMount(t *testing.T) { runSanity(t, "mount", false) }

// Thick volumes, raw block.
func TestSanityBlock(t *testing.T) { runSanity(t, "block", false) }

// Thin volumes in a thin pool, mounted: snapshots and clones are instant.
func TestSanityThin(t *testing.T) { runSanity(t, "mount", true) }

func runSanity(t *testing.T, accessType string, thin bool) {
	disk := testenv.Disk(t, "CARVE_TEST_DISK")
	c := testenv.PrivateLVM(t)
	testenv.NewVG(t, c, vg, disk)
	params := map[string]string{"volumeGroup": vg, "fsType": "ext4"}
	if thin {
		if _, err := c.CreateThinPool(context.Background(), vg, pool, 1<<30); err != nil {
			t.Fatal(err)
		}
		params["thinPool"] = pool
	}
	endpoint := testenv.StartCarve(t, "--volume-groups="+vg, "--node-id=sanity-node", "--max-volumes=3",
		"--thin-overprovision-ratio=4")

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
	cfg.IdempotentCount = 2
	cfg.TestNodeVolumeAttachLimit = true
	sanity.Test(t, cfg)
}
