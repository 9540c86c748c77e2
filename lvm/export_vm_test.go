//go:build vmtest

package lvm

import (
	"testing"

	"carve.dev/carve/lvm/runner"
)

// NewVMClient is newVMClient for the external tests (package lvm_test),
// which may import what imports lvm: the capacity rules of driver/volume.
func NewVMClient(t *testing.T, disks ...string) (*Client, runner.Runner) {
	return newVMClient(t, disks...)
}

// VMVG is the VG NewVMClient makes.
const VMVG = vmVG
