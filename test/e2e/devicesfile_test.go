//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestNodeAdministration: what an administrator does to a node's LVM
// while Carve serves, one node each, side by side (alone otherwise: they
// change a node's capacity); then a disk declaration takes the disk
// testDevicesFile gave back.
func TestNodeAdministration(t *testing.T) {
	t.Run("SideBySide", func(t *testing.T) {
		t.Run("DevicesFile", testDevicesFile)
		t.Run("ThinPoolFills", testThinPoolFills)
	})
	t.Run("DeclaredDisks", testDeclaredDisks)
}

// lvm2's devices file (use_devicesfile = 1, as on RHEL 9 and
// later): lvm2 uses only the devices listed in
// /etc/lvm/devices/system.devices. On carve-vm2, whose VG e2e is on its
// first two disks, listed there:
//   - the administrator gives the VG the node's third disk, which the file
//     did not list (vgextend, which lists it): Carve's capacity grows by
//     it, and a claim larger than the VG's free space before is carved
//     there, partly on the new disk;
//   - the disk is then taken off the file (lvmdevices --deldev: what a
//     devices file copied from another node or not updated after a disk
//     was replaced does): lvm2 no longer sees that PV. Carve reports it,
//     on the node's NodeStorage (the VG's health: MissingPhysicalVolume)
//     and on the volume using it (its LogicalVolume's health), instead of
//     serving the VG as if it had always been smaller;
//   - listed again, the reports clear; the claim is deleted and the disk
//     leaves the VG, as it came.
//
// It changes carve-vm2's VG, so it runs beside testThinPoolFills only
// (TestNodeAdministration).
func testDevicesFile(t *testing.T) {
	t.Parallel()
	const node, disk = vmNode2, "/dev/vdc"
	vm := nodeVM(t, node)
	listed := devicesFile(t, node)
	pvs, err := vm.sh("pvs", "--noheadings", "-o", "pv_name", "--select", "vg_name=e2e")
	if err != nil {
		t.Fatal(err)
	}
	for _, pv := range strings.Fields(pvs) {
		if !slices.Contains(listed, pv) {
			t.Errorf("the devices file of %s does not list %s, a PV of VG e2e: %v", node, pv, listed)
		}
	}
	// The guest lists every disk at boot: a disk just attached is not.
	if out, err := vm.sh("lvm", "lvmdevices", "--deldev", disk); err != nil {
		t.Fatalf("lvmdevices --deldev %s: %v: %s", disk, err, out)
	}
	before := vgFree(t, node)
	checkCapacities(t, "before the VG grows")

	if out, err := vm.sh("vgextend", "-q", "e2e", disk); err != nil {
		t.Fatalf("vgextend e2e %s: %v: %s", disk, err, out)
	}
	t.Cleanup(func() { restoreVG(t, node, disk) })
	if got := devicesFile(t, node); !slices.Contains(got, disk) {
		t.Errorf("vgextend did not list %s in the devices file: %v", disk, got)
	}
	checkCapacities(t, "after vgextend")
	size := before/mi + 512
	p := blockPodOn(t, "grown-1", node, "carve-thick", map[string]string{"grown": fmt.Sprintf("%dMi", size)})
	pv := boundClaim(t, "grown").Spec.VolumeName
	devs, err := vm.sh("lvs", "--noheadings", "-o", "devices", "e2e/"+pv)
	if err != nil || !strings.Contains(devs, disk) {
		t.Fatalf("LV %s of %d MiB (the VG had %d MiB free before) is on %q, not also on %s: %v", pv, size, before/mi, devs, disk, err)
	}

	// --yes: lvmdevices asks before it drops a device an active LV uses.
	if out, err := vm.sh("lvm", "lvmdevices", "--yes", "--deldev", disk); err != nil {
		t.Fatalf("lvmdevices --deldev %s: %v: %s", disk, err, out)
	}
	waitVGHealth(t, node, "MissingPhysicalVolume", true)
	waitHealth(t, pv, "MissingPhysicalVolume", true)
	if out, err := vm.sh("lvm", "lvmdevices", "--adddev", disk); err != nil {
		t.Fatalf("lvmdevices --adddev %s: %v: %s", disk, err, out)
	}
	waitVGHealth(t, node, "MissingPhysicalVolume", false)
	waitHealth(t, pv, "MissingPhysicalVolume", false)

	deletePod(t, p.Name)
	deleteClaim(t, "grown")
}

// devicesFile lists the devices node's lvm2 devices file names.
func devicesFile(t *testing.T, node string) []string {
	t.Helper()
	out, err := nodeVM(t, node).sh("lvm", "lvmdevices")
	if err != nil {
		t.Fatalf("lvmdevices on %s: %v", node, err)
	}
	var devs []string
	for _, l := range nonEmptyLines(out) {
		for _, f := range strings.Fields(l) {
			if dev, ok := strings.CutPrefix(f, "DEVNAME="); ok {
				devs = append(devs, dev)
			}
		}
	}
	return devs
}

// restoreVG takes disk out of node's VG e2e again (its LVs are gone by
// then) and wipes its label, so the node is as it booted.
func restoreVG(t *testing.T, node, disk string) {
	t.Helper()
	vm := nodeVM(t, node)
	for _, argv := range [][]string{
		{"lvm", "lvmdevices", "--adddev", disk}, // may be listed already
		{"vgreduce", "-q", "e2e", disk},
		{"pvremove", "-q", disk},
	} {
		if out, err := vm.sh(argv...); err != nil && argv[1] != "lvmdevices" {
			t.Errorf("%s on %s: %v: %s", strings.Join(argv, " "), node, err, out)
		}
	}
	checkCapacities(t, "after the disk left the VG")
}
