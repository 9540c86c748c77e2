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
//
// An active thin pool beside them (an LV with no node of its own, active
// in every soak) must not make MakeNodes fail or skip the others.
func TestVMMakeNodesAfterAnActivationCutShort(t *testing.T) {
	c, _ := vmClient(t)
	ctx := context.Background()
	if _, err := c.CreateThinPool(ctx, vmVG, "pool", 16<<20); err != nil {
		t.Fatal(err)
	}
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

// TestVMActivateAfterAnActivationCutShort: lvm2 activates an LV with
// components (a thin pool's metadata and data, raid1 legs) components
// first; one killed in between leaves components active without their LV,
// and lvm2 then refuses the LV ("prohibited while logical volume
// vg/pool_tmeta is active") until they are deactivated. Activating a
// component on its own (lvm2 allows it, read-only) leaves the kernel in
// that state. Activate and RetagAndActivate must bring the LV up anyway.
func TestVMActivateAfterAnActivationCutShort(t *testing.T) {
	c, r := vmClient2(t)
	ctx := context.Background()
	if _, err := c.CreateThinPool(ctx, vmVG, "pool", 64<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "mirror", Size: 8 << 20, Mirrors: 1}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		lv         string
		components []string
		activate   func() error
	}{
		{"pool", []string{"pool_tmeta", "pool_tdata"}, func() error { return c.Activate(ctx, vmVG, "pool") }},
		{"mirror", []string{"mirror_rimage_1", "mirror_rmeta_0"}, func() error {
			return c.RetagAndActivate(ctx, vmVG, "mirror", []string{"carve.dev/held"}, nil, true)
		}},
	} {
		if err := c.Deactivate(ctx, vmVG, tc.lv); err != nil {
			t.Fatal(err)
		}
		for _, comp := range tc.components {
			if _, err := r.Run(ctx, "lvm", "lvchange", "-ay", "--yes", vmVG+"/"+comp); err != nil {
				t.Fatalf("activate component %s alone: %v", comp, err)
			}
		}
		// What lvm2 alone makes of it: a refusal.
		if _, err := r.Run(ctx, "lvm", "lvchange", "-ay", vmVG+"/"+tc.lv); err == nil ||
			!strings.Contains(err.Error(), "prohibited while logical volume") {
			t.Fatalf("lvchange -ay %s with components active: %v, want lvm2's refusal", tc.lv, err)
		}
		if err := tc.activate(); err != nil {
			t.Fatalf("activate %s with components left active: %v", tc.lv, err)
		}
		lv, err := c.GetLV(ctx, vmVG, tc.lv)
		if err != nil || !lv.Active {
			t.Fatalf("%s after the activation: %+v, %v; want it active", tc.lv, lv, err)
		}
		if lv.Path == "" {
			continue // a thin pool has no device of its own to open
		}
		f, err := os.Open(lv.Path)
		if err != nil {
			t.Fatalf("open %s: %v", lv.Path, err)
		}
		_ = f.Close()
	}
}
