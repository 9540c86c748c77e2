//go:build vmtest

package lvm

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// TestVMRepairInterrupted puts a raid1 LV and a linear LV into the states
// an lvcreate -s killed mid-way left in the VM (suspended; suspended with
// another table loaded beside the live one) and checks that the repair
// brings both back on their own tables, with their data, and touches
// nothing healthy.
func TestVMRepairInterrupted(t *testing.T) {
	c, _ := vmClient2(t)
	ctx := context.Background()
	for _, o := range []CreateLVOptions{{VG: vmVG, Name: "mirror", Size: 8 << 20, Mirrors: 1}, {VG: vmVG, Name: "plain", Size: 8 << 20},
		{VG: vmVG, Name: "healthy", Size: 4 << 20}} {
		if _, err := c.CreateLV(ctx, o); err != nil {
			t.Fatal(err)
		}
		writePattern(t, "/dev/"+vmVG+"/"+o.Name, 7)
	}
	dm := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("dmsetup", args...).CombinedOutput(); err != nil {
			t.Fatalf("dmsetup %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	// The plain LV gets a COW snapshot: its device is then a
	// snapshot-origin over a -real layer, and both are suspended, lower
	// first, as lvm2 does (the soak's hang came from resuming such a tree
	// top first).
	if _, err := c.CreateCOWSnapshot(ctx, vmVG, "plain", "plainsnap", 4<<20); err != nil {
		t.Fatal(err)
	}
	mirror, plain := dmNameOf(getLV(t, c, "mirror")), dmNameOf(getLV(t, c, "plain"))
	dm("suspend", plain+"-real")
	dm("suspend", mirror)
	dm("load", plain, "--table", "0 16384 error")
	t.Cleanup(func() { _ = c.RemoveLV(context.Background(), vmVG, "plainsnap") })
	dm("suspend", plain)
	if lv := getLV(t, c, "mirror"); lv.Live() {
		t.Fatalf("suspended raid1 LV reported live: %+v", lv)
	}
	did, err := c.RepairInterrupted(ctx, vmVG)
	if err != nil {
		t.Fatalf("repair: %v (did %q)", err, did)
	}
	t.Logf("repairs: %q", did)
	for _, name := range []string{"mirror", "plain", "healthy"} {
		lv := getLV(t, c, name)
		if !lv.Live() {
			t.Errorf("%s after the repair: attr %s, device %d; want it live", name, lv.Attr, lv.KernelMajor)
		}
		mustRead(t, "/dev/"+vmVG+"/"+name, 7)
	}
	if again, err := c.RepairInterrupted(ctx, vmVG); err != nil || len(again) > 0 {
		t.Errorf("a second repair: %q, %v; want nothing to do", again, err)
	}
}

// dmNameOf is the device-mapper name of lv: its dm path's base.
func dmNameOf(lv LV) string { return strings.TrimPrefix(lv.DMPath, "/dev/mapper/") }
