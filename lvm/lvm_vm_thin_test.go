//go:build vmtest

// Thin pools, thin and COW snapshots against real lvm2 (see lvm_vm_test.go
// for how to run), with the data written to origins read back from the
// snapshots.
package lvm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"
)

// timed runs f and logs how long it took, for the timings in the test log.
func timed[T any](t *testing.T, what string, f func() (T, error)) (T, error) {
	t.Helper()
	start := time.Now()
	v, err := f()
	t.Logf("timing: %s: %v", what, time.Since(start).Round(time.Millisecond))
	return v, err
}

func timedErr(t *testing.T, what string, f func() error) error {
	t.Helper()
	_, err := timed(t, what, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

const patternSize = 1 << 20

// writePattern writes a 1 MiB pattern derived from seed at the start of a
// device and flushes it to the device.
func writePattern(t *testing.T, path string, seed byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(pattern(seed)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func pattern(seed byte) []byte {
	b := make([]byte, patternSize)
	for i := range b {
		b[i] = seed + byte(i%251)
	}
	return b
}

func mustRead(t *testing.T, path string, seed byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	got := make([]byte, patternSize)
	if _, err := f.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, pattern(seed)) {
		t.Fatalf("%s does not hold pattern %d", path, seed)
	}
}

func vgFree(t *testing.T, c *Client) uint64 { t.Helper(); return vmVGOf(t, c).Free }

func vmVGOf(t *testing.T, c *Client) VG {
	t.Helper()
	vg, err := c.GetVG(context.Background(), vmVG)
	if err != nil {
		t.Fatal(err)
	}
	return vg
}

func TestVMThin(t *testing.T) {
	c, _ := vmClient(t)
	ctx := context.Background()
	free0 := vgFree(t, c)

	pool, err := timed(t, "CreateThinPool 64 MiB", func() (LV, error) {
		return c.CreateThinPool(ctx, vmVG, "pool0", 64<<20, "carve.dev/pool=p0")
	})
	if err != nil {
		t.Fatal(err)
	}
	if !pool.IsThinPool() || pool.Size != 64<<20 || !pool.HasTag("carve.dev/pool=p0") || pool.WhenFull == "" ||
		pool.MetadataSize == 0 || (pool.Active && pool.ThinPoolFree() != pool.Size) {
		t.Fatalf("pool = %+v", pool)
	}
	ext := pool.ExtentSize
	opts := CreateLVOptions{VG: vmVG, Name: "thin1", Size: 2*ext + 1, ThinPool: "pool0", Tags: []string{"carve.dev/volume=pvc-t"}}
	freeBefore := vgFree(t, c)
	thin, err := timed(t, "CreateLV thin", func() (LV, error) { return c.CreateLV(ctx, opts) })
	if err != nil {
		t.Fatal(err)
	}
	if !thin.IsThinVolume() || thin.PoolLV != "pool0" || thin.Size != 3*ext || !thin.Active || !thin.HasTag("carve.dev/volume=pvc-t") {
		t.Fatalf("thin LV = %+v", thin)
	}
	if taken := freeBefore - vgFree(t, c); taken != Footprint(opts, ext) {
		t.Errorf("thin LV took %d from the VG, Footprint says %d", taken, Footprint(opts, ext))
	}
	writePattern(t, thin.Path, 1)

	snap, err := timed(t, "CreateThinSnapshot", func() (LV, error) {
		return c.CreateThinSnapshot(ctx, vmVG, "thin1", "snap1", "carve.dev/snapshot=s1")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("new thin snapshot: active %v, attr %s", snap.Active, snap.Attr)
	if !snap.IsThinVolume() || snap.Origin != "thin1" || snap.SkipActivation || !snap.HasTag("carve.dev/snapshot=s1") {
		t.Fatalf("snapshot = %+v", snap)
	}
	if !snap.Active {
		if err := timedErr(t, "Activate thin snapshot", func() error { return c.Activate(ctx, vmVG, "snap1") }); err != nil {
			t.Fatal(err)
		}
	}
	writePattern(t, thin.Path, 2)
	mustRead(t, snap.Path, 1)
	mustRead(t, thin.Path, 2)
	if p := getLV(t, c, "pool0"); p.DataPercent <= 0 || p.ThinPoolFree() >= p.Size {
		t.Errorf("pool after writes: %.2f%% used, %d free", p.DataPercent, p.ThinPoolFree())
	}

	t.Run("extend", func(t *testing.T) {
		before := vgFree(t, c)
		if err := timedErr(t, "ExtendLV thin", func() error { return c.ExtendLV(ctx, vmVG, "thin1", 5*ext) }); err != nil {
			t.Fatal(err)
		}
		if got := getLV(t, c, "thin1").Size; got != 5*ext {
			t.Errorf("thin size = %d, want %d", got, 5*ext)
		}
		if vgFree(t, c) != before {
			t.Error("extending a thin LV took space from the VG")
		}
	})

	t.Run("wrong origins", func(t *testing.T) {
		if _, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "thick1", Size: ext}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateThinSnapshot(ctx, vmVG, "thick1", "s"); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("thin snapshot of a thick LV: %v", err)
		}
		if _, err := c.CreateCOWSnapshot(ctx, vmVG, "thin1", "s", ext); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("COW snapshot of a thin LV: %v", err)
		}
		if err := c.RemoveLV(ctx, vmVG, "thick1"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("remove", func(t *testing.T) {
		if err := c.RemoveLV(ctx, vmVG, "pool0"); !errors.Is(err, ErrHasDependents) {
			t.Errorf("remove pool with thin LVs: %v", err)
		}
		// The origin goes; its pool and its snapshot stay.
		if err := timedErr(t, "RemoveLV thin origin", func() error { return c.RemoveLV(ctx, vmVG, "thin1") }); err != nil {
			t.Fatal(err)
		}
		orphan := getLV(t, c, "snap1")
		if orphan.Origin != "" || orphan.PoolLV != "pool0" {
			t.Errorf("snapshot after its origin's removal = %+v", orphan)
		}
		mustRead(t, orphan.Path, 1)
		if err := c.Deactivate(ctx, vmVG, "snap1"); err != nil {
			t.Fatal(err)
		}
		if err := c.Activate(ctx, vmVG, "snap1"); err != nil {
			t.Fatal(err)
		}
		if err := timedErr(t, "RemoveLV thin snapshot", func() error { return c.RemoveLV(ctx, vmVG, "snap1") }); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetLV(ctx, vmVG, "pool0"); err != nil {
			t.Errorf("pool after removing its thin LVs: %v", err)
		}
		if err := timedErr(t, "RemoveLV thin pool", func() error { return c.RemoveLV(ctx, vmVG, "pool0") }); err != nil {
			t.Fatal(err)
		}
		if got := vgFree(t, c); got != free0 {
			t.Errorf("VG free after removing everything = %d, want %d", got, free0)
		}
	})
}

func TestVMCOWSnapshot(t *testing.T) {
	c, _ := vmClient(t)
	ctx := context.Background()
	origin, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "vol1", Size: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ext := origin.ExtentSize
	writePattern(t, origin.Path, 3)

	before := vgFree(t, c)
	snap, err := timed(t, "CreateCOWSnapshot", func() (LV, error) {
		return c.CreateCOWSnapshot(ctx, vmVG, "vol1", "cow1", ext+1, "carve.dev/snapshot=c1")
	})
	if err != nil {
		t.Fatal(err)
	}
	if !snap.IsCOWSnapshot() || snap.Origin != "vol1" || snap.Size != 2*ext || !snap.Active || !snap.HasTag("carve.dev/snapshot=c1") {
		t.Fatalf("snapshot = %+v", snap)
	}
	if taken := before - vgFree(t, c); taken != 2*ext {
		t.Errorf("COW snapshot took %d, want %d", taken, 2*ext)
	}
	writePattern(t, origin.Path, 4)
	mustRead(t, snap.Path, 3)
	if s := getLV(t, c, "cow1"); s.DataPercent <= 0 || s.SnapshotInvalid {
		t.Errorf("snapshot after origin writes = %+v", s)
	}
	if err := c.ExtendLV(ctx, vmVG, "vol1", 32<<20); !errors.Is(err, ErrBusy) {
		t.Errorf("extend active origin: %v, want ErrBusy", err)
	}
	if err := c.RemoveLV(ctx, vmVG, "vol1"); !errors.Is(err, ErrHasDependents) {
		t.Errorf("remove origin: %v, want ErrHasDependents", err)
	}
	if err := timedErr(t, "RemoveLV COW snapshot", func() error { return c.RemoveLV(ctx, vmVG, "cow1") }); err != nil {
		t.Fatal(err)
	}
	if o := getLV(t, c, "vol1"); o.HasCOWSnapshots() || !o.Active {
		t.Errorf("origin after snapshot removal = %+v", o)
	}
	mustRead(t, origin.Path, 4)
	if vgFree(t, c) != before {
		t.Error("removing the snapshot did not give its space back")
	}
	if err := c.ExtendLV(ctx, vmVG, "vol1", 32<<20); err != nil {
		t.Errorf("extend without snapshots: %v", err)
	}
}

// What lvm2 does with the commands that save runs (lvcreate -an, the
// lvcreate that fails on a taken name, lvchange with tags and activation
// in one run, lvremove from the caller's report): the driver relies on
// each.
func TestVMRunSavers(t *testing.T) {
	c, _ := vmClient(t)
	ctx := context.Background()
	if _, err := c.CreateThinPool(ctx, vmVG, "pool0", 32<<20); err != nil {
		t.Fatal(err)
	}
	ext := vmVGOf(t, c).ExtentSize

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
