//go:build vmtest

package lvm

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestVMMakeNodesAfterAnActivationCutShort: an LV active in the kernel
// whose /dev nodes are gone (lvm2 makes them at the end of an activation
// where no udev runs, and a killed lvchange -ay never gets there) is
// openable again after MakeNodes, and an inactive LV gets none.
func TestVMMakeNodesAfterAnActivationCutShort(t *testing.T) {
	c, _ := vmClient(t)
	ctx := context.Background()
	made := map[string]LV{}
	for _, name := range []string{"cut", "idle"} {
		l, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: name, Size: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		made[name] = l
	}
	lv, idle := made["cut"], made["idle"]
	if err := c.Deactivate(ctx, vmVG, idle.Name); err != nil {
		t.Fatal(err)
	}
	mapper := "/dev/mapper/" + strings.ReplaceAll(vmVG, "-", "--") + "-cut" // lvm2 doubles the VG's dashes
	for _, p := range []string{lv.Path, mapper} {
		if err := os.Remove(p); err != nil {
			t.Fatalf("remove %s: %v", p, err)
		}
	}
	if after, err := c.GetLV(ctx, vmVG, lv.Name); err != nil || !after.Active {
		t.Fatalf("LV without its nodes: %+v, %v; want it still active", after, err)
	}
	if _, err := os.Stat(lv.Path); !os.IsNotExist(err) {
		t.Fatalf("%s after its removal: %v", lv.Path, err)
	}
	if err := c.MakeNodes(ctx, vmVG); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(lv.Path)
	if err != nil {
		t.Fatalf("open after MakeNodes: %v", err)
	}
	_ = f.Close()
	mustExist(t, mapper, true)
	mustExist(t, idle.Path, false)
	if err := c.MakeNodes(ctx, "no-such-vg"); err == nil {
		t.Error("MakeNodes of a VG that does not exist: no error")
	}
}
