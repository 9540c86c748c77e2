//go:build vmtest

// What lvm2 does with the commands that save runs (lvcreate -an, the
// lvcreate that fails on a taken name, lvchange with tags and activation
// in one run, lvremove from the caller's report), against real lvm2 (see
// lvm_vm_test.go for how to run). The driver relies on each.
package lvm

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestVMRunSavers(t *testing.T) {
	c, _ := vmClient(t)
	ctx := context.Background()
	if _, err := c.CreateThinPool(ctx, vmVG, "pool0", 32<<20); err != nil {
		t.Fatal(err)
	}
	ext := vgExtent(t, c)

	// A thin LV made inactive with its tags, in one run: the report the
	// options describe is what lvm2 then reports.
	o := CreateLVOptions{VG: vmVG, Name: "thin1", Size: ext + 1, ThinPool: "pool0", Tags: []string{"carve.dev/a"},
		ExtentSize: ext, Inactive: true, SkipReadBack: true}
	made, err := timed(t, "CreateLV thin -an", func() (LV, error) { return c.CreateLV(ctx, o) })
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetLV(ctx, vmVG, "thin1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Active || got.Size != made.Size || got.PoolLV != made.PoolLV || !slices.Equal(got.Tags, made.Tags) {
		t.Errorf("lvm2 reports %+v, CreateLV described %+v", got, made)
	}
	// A taken name: lvcreate fails with ErrAlreadyExists and changes nothing.
	o.Tags = []string{"carve.dev/b"}
	if _, err := c.CreateLV(ctx, o); !errors.Is(err, ErrAlreadyExists) {
		t.Errorf("lvcreate of a taken name: %v, want ErrAlreadyExists", err)
	}
	if again, _ := c.GetLV(ctx, vmVG, "thin1"); !slices.Equal(again.Tags, got.Tags) {
		t.Errorf("failed lvcreate changed the LV's tags: %v", again.Tags)
	}

	// A thin snapshot of a reported origin, inactive, in one run.
	snap, err := timed(t, "CreateSnapshotOf thin -an", func() (LV, error) {
		return c.CreateSnapshotOf(ctx, got, "snap1", SnapshotOptions{Tags: []string{"carve.dev/s"}, Inactive: true, SkipReadBack: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := c.GetLV(ctx, vmVG, "snap1"); err != nil || s.Active || s.SkipActivation || s.Origin != "thin1" || s.Size != snap.Size {
		t.Errorf("thin snapshot = %+v, %v; want an inactive snapshot of thin1 without the skip flag, as described (%+v)", s, err, snap)
	}

	// Tags and activation in one lvchange, both ways.
	thick, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "thick1", Size: ext, Tags: []string{"carve.dev/pending"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Deactivate(ctx, vmVG, "thick1"); err != nil {
		t.Fatal(err)
	}
	if err := timedErr(t, "RetagAndActivate -ay", func() error {
		return c.RetagAndActivate(ctx, vmVG, "thick1", []string{"carve.dev/deleting"}, []string{"carve.dev/pending"}, true)
	}); err != nil {
		t.Fatal(err)
	}
	if lv, _ := c.GetLV(ctx, vmVG, "thick1"); !lv.Active || !slices.Equal(lv.Tags, []string{"carve.dev/deleting"}) {
		t.Errorf("after tags and -ay: %+v", lv)
	}
	if err := c.RetagAndActivate(ctx, vmVG, "thick1", nil, []string{"carve.dev/deleting"}, false); err != nil {
		t.Fatal(err)
	}
	if lv, _ := c.GetLV(ctx, vmVG, "thick1"); lv.Active || len(lv.Tags) != 0 {
		t.Errorf("after tags and -an: %+v", lv)
	}

	// lvremove from the caller's report; an origin's is refused before.
	if _, err := c.CreateSnapshotOf(ctx, thick, "cow1", SnapshotOptions{COWSize: ext, SkipReadBack: true}); err != nil {
		t.Fatal(err)
	}
	origin, _ := c.GetLV(ctx, vmVG, "thick1")
	if err := c.RemoveLVOf(ctx, origin); !errors.Is(err, ErrHasDependents) {
		t.Errorf("RemoveLVOf of an origin: %v, want ErrHasDependents", err)
	}
	cow, _ := c.GetLV(ctx, vmVG, "cow1")
	for _, lv := range []LV{cow, snap, got} {
		if err := timedErr(t, "RemoveLVOf "+lv.Name, func() error { return c.RemoveLVOf(ctx, lv) }); err != nil {
			t.Errorf("RemoveLVOf %s: %v", lv.Name, err)
		}
	}
	if err := c.RemoveLVOf(ctx, got); !errors.Is(err, ErrNotFound) {
		t.Errorf("RemoveLVOf of a removed LV: %v, want ErrNotFound", err)
	}
}

func vgExtent(t *testing.T, c *Client) uint64 {
	t.Helper()
	vg, err := c.GetVG(context.Background(), vmVG)
	if err != nil {
		t.Fatal(err)
	}
	return vg.ExtentSize
}
