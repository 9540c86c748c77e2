//go:build vmtest

// raid1 and striped LVs against real lvm2 (see lvm_vm_test.go for how to
// run), with Footprint and CheckPlacement checked against what lvm2 does.
package lvm

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"carve.dev/carve/lvm/runner"
)

// With one PV, raid1 and striped LVs cannot be placed: CheckPlacement and
// lvm2 agree. Linear Footprint matches lvm2 too.
func TestVMOnePVPlacement(t *testing.T) {
	c, _ := vmClient(t)
	ctx := context.Background()
	raid := CreateLVOptions{VG: vmVG, Name: "mirror1", Size: 1 << 20, Mirrors: 1}
	err := timedErr(t, "CheckPlacement", func() error { return c.CheckPlacement(ctx, raid) })
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "raid1 with 2 legs needs 2 PVs") ||
		!strings.HasSuffix(err.Error(), vmVG+" has 1") {
		t.Errorf("CheckPlacement raid1 on one PV: %v", err)
	}
	if _, err := c.CreateLV(ctx, raid); !errors.Is(err, ErrNoSpace) {
		t.Errorf("lvcreate raid1 on one PV: %v, want ErrNoSpace", err)
	}
	striped := CreateLVOptions{VG: vmVG, Name: "stripe1", Size: 1 << 20, Stripes: 2}
	if err := c.CheckPlacement(ctx, striped); !errors.Is(err, ErrNoSpace) {
		t.Errorf("CheckPlacement striped on one PV: %v", err)
	}
	if _, err := c.CreateLV(ctx, striped); !errors.Is(err, ErrNoSpace) {
		t.Errorf("lvcreate striped on one PV: %v, want ErrNoSpace", err)
	}
	linear := CreateLVOptions{VG: vmVG, Name: "vol1", Size: 5<<20 + 1}
	before, ext := vgFree(t, c), getVGExtent(t, c)
	if _, err := c.CreateLV(ctx, linear); err != nil {
		t.Fatal(err)
	}
	if taken := before - vgFree(t, c); taken != Footprint(linear, ext) {
		t.Errorf("linear LV took %d, Footprint says %d", taken, Footprint(linear, ext))
	}
}

func getVGExtent(t *testing.T, c *Client) uint64 {
	t.Helper()
	vg, err := c.GetVG(context.Background(), vmVG)
	if err != nil {
		t.Fatal(err)
	}
	return vg.ExtentSize
}

func TestVMRAID1AndStriped(t *testing.T) {
	c, r := vmClient2(t)
	ctx := context.Background()
	ext := getVGExtent(t, c)
	free0 := vgFree(t, c)

	t.Run("raid1", func(t *testing.T) {
		o := CreateLVOptions{VG: vmVG, Name: "mirror1", Size: 2*ext + 1, Mirrors: 1, Tags: []string{"carve.dev/volume=pvc-r"}}
		if err := c.CheckPlacement(ctx, o); err != nil {
			t.Fatal(err)
		}
		lv, err := timed(t, "CreateLV raid1 (2 legs, 12 MiB)", func() (LV, error) { return c.CreateLV(ctx, o) })
		if err != nil {
			t.Fatal(err)
		}
		if lv.Layout != "raid,raid1" || lv.Size != 3*ext || !lv.Active || lv.SyncAction == "" || !lv.HasTag("carve.dev/volume=pvc-r") {
			t.Fatalf("raid1 = %+v", lv)
		}
		t.Logf("raid1 after create: sync %s %.2f%%", lv.SyncAction, lv.SyncPercent)
		if taken := free0 - vgFree(t, c); taken != Footprint(o, ext) {
			t.Errorf("raid1 took %d, Footprint says %d", taken, Footprint(o, ext))
		}
		before := vgFree(t, c)
		if err := timedErr(t, "ExtendLV raid1", func() error { return c.ExtendLV(ctx, vmVG, "mirror1", 5*ext) }); err != nil {
			t.Fatal(err)
		}
		grown := o
		grown.Size = 5 * ext
		if got := getLV(t, c, "mirror1"); got.Size != 5*ext || got.Layout != "raid,raid1" {
			t.Errorf("extended raid1 = %+v", got)
		}
		if taken := before - vgFree(t, c); taken != Footprint(grown, ext)-Footprint(o, ext) {
			t.Errorf("raid1 extension took %d, want %d", taken, Footprint(grown, ext)-Footprint(o, ext))
		}
		if err := timedErr(t, "RemoveLV raid1", func() error { return c.RemoveLV(ctx, vmVG, "mirror1") }); err != nil {
			t.Fatal(err)
		}
		if vgFree(t, c) != free0 {
			t.Error("VG free not restored after removing raid1")
		}
	})

	t.Run("striped", func(t *testing.T) {
		o := CreateLVOptions{VG: vmVG, Name: "stripe1", Size: 3 * ext, Stripes: 2, StripeSize: 64 << 10}
		lv, err := timed(t, "CreateLV striped (2 stripes)", func() (LV, error) { return c.CreateLV(ctx, o) })
		if err != nil {
			t.Fatal(err)
		}
		if lv.Layout != "striped" || lv.Size != 4*ext {
			t.Fatalf("striped = %+v", lv)
		}
		if taken := free0 - vgFree(t, c); taken != Footprint(o, ext) {
			t.Errorf("striped took %d, Footprint says %d", taken, Footprint(o, ext))
		}
		// A filler after it, so that the extension is a second segment.
		if _, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "filler", Size: 2 * ext, Stripes: 2}); err != nil {
			t.Fatal(err)
		}
		if err := timedErr(t, "ExtendLV striped", func() error { return c.ExtendLV(ctx, vmVG, "stripe1", 5*ext) }); err != nil {
			t.Fatal(err)
		}
		if got := getLV(t, c, "stripe1").Size; got != 6*ext {
			t.Errorf("extended striped size = %d, want %d (whole stripe rows)", got, 6*ext)
		}
		segs := segmentStripes(t, r, "stripe1")
		if len(segs) != 2 || segs[0] != "2 65536" || segs[1] != "2 65536" {
			t.Errorf("segments (stripes, stripe size) = %q, want two of 2 x 64 KiB", segs)
		}
		lvs, err := c.ListLVs(ctx, vmVG)
		if err != nil || len(lvs) != 2 {
			t.Errorf("ListLVs = %d LVs, %v; want stripe1 once and filler", len(lvs), err)
		}
		for _, name := range []string{"stripe1", "filler"} {
			if err := c.RemoveLV(ctx, vmVG, name); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("placement", func(t *testing.T) { testVMPlacement(t, c, r, ext) })
}

// segmentStripes reports "stripes stripe_size" for each segment of an LV.
func segmentStripes(t *testing.T, r runner.Runner, lv string) []string {
	t.Helper()
	out, err := r.Run(context.Background(), "lvm", "lvs", "--noheadings", "--segments", "--units", "b", "--nosuffix",
		"-o", "stripes,stripe_size", vmVG+"/"+lv)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		segs = append(segs, strings.Join(strings.Fields(l), " "))
	}
	return segs
}

// testVMPlacement leaves 3 free extents on each PV and checks that
// CheckPlacement accepts exactly what lvm2 can place.
func testVMPlacement(t *testing.T, c *Client, r runner.Runner, ext uint64) {
	ctx := context.Background()
	pvs, err := c.ListVGPVs(ctx, vmVG)
	if err != nil || len(pvs) != 2 {
		t.Fatalf("ListVGPVs = %+v, %v", pvs, err)
	}
	for i, pv := range pvs {
		fill(t, r, "fill"+strconv.Itoa(i), pv.Free/ext-3, pv.Name)
	}
	for _, tc := range []struct {
		o    CreateLVOptions
		fits bool
	}{
		{CreateLVOptions{Size: 2 * ext, Mirrors: 1}, true}, // 2 data + 1 metadata extent per PV
		{CreateLVOptions{Size: 2*ext + 1, Mirrors: 1}, false},
		{CreateLVOptions{Size: 6 * ext, Stripes: 2}, true},
		{CreateLVOptions{Size: 6*ext + 1, Stripes: 2}, false},
		{CreateLVOptions{Size: ext, Mirrors: 2}, false},
	} {
		tc.o.VG, tc.o.Name = vmVG, "placed"
		err := c.CheckPlacement(ctx, tc.o)
		if (err == nil) != tc.fits || err != nil && !errors.Is(err, ErrNoSpace) {
			t.Errorf("CheckPlacement(%+v) = %v, want fits=%v", tc.o, err, tc.fits)
		}
		_, err = c.CreateLV(ctx, tc.o)
		if (err == nil) != tc.fits || err != nil && !errors.Is(err, ErrNoSpace) {
			t.Errorf("lvm2 disagrees: CreateLV(%+v) = %v, want fits=%v", tc.o, err, tc.fits)
		}
		if err == nil {
			if got := vgFree(t, c); got != 0 {
				t.Errorf("exact fit left %d free", got)
			}
			if err := c.RemoveLV(ctx, vmVG, "placed"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One PV full: raid1 has a single PV left.
	fill(t, r, "fill2", 3, pvs[1].Name)
	err = c.CheckPlacement(ctx, CreateLVOptions{VG: vmVG, Name: "placed", Size: 1, Mirrors: 1})
	if !errors.Is(err, ErrNoSpace) || !strings.HasSuffix(err.Error(), vmVG+" has 1") {
		t.Errorf("CheckPlacement with one usable PV: %v", err)
	}
	t.Log(err)
}

// fill allocates extents on one PV with a linear LV (CreateLV does not pick
// PVs, so this goes through the runner).
func fill(t *testing.T, r runner.Runner, name string, extents uint64, pv string) {
	t.Helper()
	_, err := r.Run(context.Background(), "lvm", "lvcreate", "-n", name, "-l", strconv.FormatUint(extents, 10),
		"--yes", vmVG, pv)
	if err != nil {
		t.Fatal(err)
	}
}
