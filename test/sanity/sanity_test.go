//go:build vmtest

// Package sanity runs the kubernetes-csi sanity suite against `carve
// standalone` on a real volume group, with real mkfs and mounts. It runs as
// root inside the test VM (scripts/test-vm.sh).
package sanity

import (
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"

	"carve.dev/carve/test/testenv"
)

const vg = "sanityvg"

func TestSanityMount(t *testing.T) { runSanity(t, "mount") }

func TestSanityBlock(t *testing.T) { runSanity(t, "block") }

func runSanity(t *testing.T, accessType string) {
	disk := testenv.Disk(t, "CARVE_TEST_DISK")
	c := testenv.PrivateLVM(t)
	testenv.NewVG(t, c, vg, disk)
	endpoint := testenv.StartCarve(t, "--volume-groups="+vg, "--node-id=sanity-node", "--max-volumes=3")

	cfg := sanity.NewTestConfig()
	cfg.Address = endpoint
	dir := t.TempDir()
	cfg.TargetPath = filepath.Join(dir, "target")
	cfg.StagingPath = filepath.Join(dir, "staging")
	// Small volumes keep the wipe on delete and mkfs quick in the VM; ext4
	// has no practical minimum.
	cfg.TestVolumeSize = 16 << 20
	cfg.TestVolumeAccessType = accessType
	cfg.TestVolumeParameters = map[string]string{"volumeGroup": vg, "fsType": "ext4"}
	cfg.IdempotentCount = 2
	cfg.TestNodeVolumeAttachLimit = true
	sanity.Test(t, cfg)
}
