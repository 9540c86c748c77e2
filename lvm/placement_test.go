package lvm

import (
	"errors"
	"testing"
)

const gib = 1 << 30

func TestFootprint(t *testing.T) {
	const ext = 4 * mib
	for _, tc := range []struct {
		o    CreateLVOptions
		want uint64
	}{
		{CreateLVOptions{Size: 1}, ext},
		{CreateLVOptions{Size: 8 * mib}, 8 * mib},
		{CreateLVOptions{Size: 12 * mib, Stripes: 2}, 16 * mib},
		{CreateLVOptions{Size: 1, Stripes: 3, StripeSize: 64 << 10}, 12 * mib},
		{CreateLVOptions{Size: 16 * mib, Mirrors: 1}, 2 * (16*mib + ext)},
		{CreateLVOptions{Size: 16*mib - 1, Mirrors: 2}, 3 * (16*mib + ext)},
		// Each image a data stripe's share plus a metadata extent.
		{CreateLVOptions{Size: 5 * mib, RAID: RAID5, Stripes: 2}, 3 * (4*mib + ext)},
		{CreateLVOptions{Size: 24 * mib, RAID: RAID6, Stripes: 3}, 5 * (8*mib + ext)},
		{CreateLVOptions{Size: 16 * mib, RAID: RAID10, Stripes: 2}, 4 * (8*mib + ext)},
		// Integrity: 4 MiB of metadata per started 500 MiB of a leg and
		// its journal's room; what lvm2 took in the test VM for 16 MiB.
		{CreateLVOptions{Size: 16 * mib, Mirrors: 1, Integrity: true}, 56 * mib},
		{CreateLVOptions{Size: 500 * mib, Mirrors: 1, Integrity: true}, 2 * (500*mib + ext + 8*mib + 4*mib)},
		{CreateLVOptions{Size: 2 * gib, Mirrors: 1, Integrity: true}, 2 * (2*gib + ext + 20*mib + 32*mib)},
		{CreateLVOptions{Size: 100 * gib, ThinPool: "pool0"}, 0},
		{CreateLVOptions{}, 0},
		{CreateLVOptions{Size: ^uint64(0)}, ^uint64(0)},
		{CreateLVOptions{Size: ^uint64(0) / 2, Mirrors: 3}, ^uint64(0)},
	} {
		if got := Footprint(tc.o, ext); got != tc.want {
			t.Errorf("Footprint(%+v) = %d, want %d", tc.o, got, tc.want)
		}
	}
}

// TestFootprintMatchesLVM compares with what lvm2 took from the VGs in
// capture.sh: striped stripe1 and stripe2 (16 MiB each, 2 stripes), raid1
// mirror1 (16 MiB, 2 legs).
func TestFootprintMatchesLVM(t *testing.T) {
	for _, tc := range []struct {
		before, after string
		opts          []CreateLVOptions
	}{
		{"striped-vg-empty", "striped-vg", []CreateLVOptions{{Size: 16 * mib, Stripes: 2}, {Size: 16 * mib, Stripes: 2}}},
		{"raid1-vg-empty", "raid1-vg", []CreateLVOptions{{Size: 16 * mib, Mirrors: 1}}},
	} {
		before, after := parseVGFixture(t, tc.before), parseVGFixture(t, tc.after)
		var sum uint64
		for _, o := range tc.opts {
			sum += Footprint(o, before.ExtentSize)
		}
		if taken := before.Free - after.Free; sum != taken {
			t.Errorf("%s: Footprint = %d, lvm2 took %d", tc.after, sum, taken)
		}
	}
}

func parseVGFixture(t *testing.T, name string) VG {
	t.Helper()
	vgs, err := parseVGs(fixture(t, name+".json"))
	if err != nil || len(vgs) != 1 {
		t.Fatalf("%s: %v, %v", name, vgs, err)
	}
	return vgs[0]
}

// raid metadata follows lvm2's formula: 8 KiB + one bit per region.
func TestRAIDMetaExtents(t *testing.T) {
	for _, tc := range []struct{ size, extent, want uint64 }{
		{16 * mib, 4 * mib, 1},
		{1 << 50, 4 * mib, 1},   // 1 PiB: 2^21 regions of 512 MiB, 264 KiB
		{1 << 40, 4 << 10, 18},  // 1 TiB, 4 KiB extents: 2^19 regions, 72 KiB
		{16 << 40, 4 << 10, 66}, // 16 TiB: regions doubled to 8 MiB, 264 KiB
		{1, 0, 0},
	} {
		if got := raidMetaExtents(tc.size, tc.extent); got != tc.want {
			t.Errorf("raidMetaExtents(%d, %d) = %d, want %d", tc.size, tc.extent, got, tc.want)
		}
	}
}

func TestCheckPlacement(t *testing.T) {
	// Both PVs of carve-striped have 4273995776 bytes (1019 extents) free.
	const free = 1019 * 4 * mib
	for _, tc := range []struct {
		o    CreateLVOptions
		want string // "" for nil
	}{
		{CreateLVOptions{Size: free - 4*mib, Mirrors: 1}, ""}, // leg + metadata extent fill a PV exactly
		{CreateLVOptions{Size: free, Mirrors: 1}, "placement carve-striped/x: insufficient free space: " +
			"raid1 with 2 legs needs 2 PVs with 3.99 GiB free each; carve-striped has 0"},
		{CreateLVOptions{Size: gib, Mirrors: 2}, "placement carve-striped/x: insufficient free space: " +
			"raid1 with 3 legs needs 3 PVs with 1.01 GiB free each; carve-striped has 2"},
		{CreateLVOptions{Size: 2 * (free - 4*mib), RAID: RAID5, Stripes: 2}, "placement carve-striped/x: insufficient free space: " +
			"raid5 with 2 data stripes needs 3 PVs with 3.99 GiB free each; carve-striped has 2"},
		{CreateLVOptions{Size: 2 * (free - 4*mib), RAID: RAID10, Stripes: 2}, "placement carve-striped/x: insufficient free space: " +
			"raid10 with 2 data stripes needs 4 PVs with 3.99 GiB free each; carve-striped has 2"},
		// A leg of 4004 MiB, a raid metadata extent and 9 × 4 + 32 MiB of
		// integrity metadata fill a PV exactly.
		{CreateLVOptions{Size: free - 72*mib, Mirrors: 1, Integrity: true}, ""},
		{CreateLVOptions{Size: free - 68*mib, Mirrors: 1, Integrity: true}, "placement carve-striped/x: insufficient free space: " +
			"raid1 with 2 legs needs 2 PVs with 3.99 GiB free each; carve-striped has 0"},
		{CreateLVOptions{Size: 2 * free, Stripes: 2}, ""},
		{CreateLVOptions{Size: 2*free + 1, Stripes: 2}, "placement carve-striped/x: insufficient free space: " +
			"striped with 2 stripes needs 2 PVs with 3.99 GiB free each; carve-striped has 0"},
	} {
		tc.o.VG, tc.o.Name = "carve-striped", "x"
		c := newFake(t,
			step{args: vgsArgs("carve-striped"), out: "@striped-vg"},
			step{args: pvsArgs(), out: "@striped-pvs"},
		)
		err := c.CheckPlacement(ctx, tc.o)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, ErrNoSpace)) {
			t.Errorf("CheckPlacement(%+v) =\n %v\nwant\n %s", tc.o, err, tc.want)
		}
	}
}

// Missing and non-allocatable PVs do not count; linear and thin LVs need no
// check at all.
func TestCheckPlacementSkipsUnusablePVs(t *testing.T) {
	c := newFake(t,
		step{args: vgsArgs("carve-partial"), out: "@partial-vg"},
		step{args: pvsArgs(), out: "@partial-pvs"},
		step{args: vgsArgs("vg"), out: `{"report":[{"vg":[{"vg_name":"vg","vg_extent_size":"4194304"}]}]}`},
		step{args: pvsArgs(), out: `{"report":[{"pv":[
			{"pv_name":"/dev/vda","vg_name":"vg","pv_free":"4194304000","pv_attr":"a--"},
			{"pv_name":"/dev/vdb","vg_name":"vg","pv_free":"4194304000","pv_attr":"---"},
			{"pv_name":"/dev/vdc","vg_name":"other","pv_free":"4194304000","pv_attr":"a--"}]}]}`},
	)
	err := c.CheckPlacement(ctx, CreateLVOptions{VG: "carve-partial", Name: "x", Size: 1, Mirrors: 1})
	if !errors.Is(err, ErrNoSpace) {
		t.Errorf("VG with a missing PV: %v, want ErrNoSpace", err)
	}
	err = c.CheckPlacement(ctx, CreateLVOptions{VG: "vg", Name: "x", Size: 1, Stripes: 2})
	if !errors.Is(err, ErrNoSpace) {
		t.Errorf("non-allocatable PV: %v, want ErrNoSpace", err)
	}
	for _, o := range []CreateLVOptions{{VG: "vg", Name: "x", Size: 1}, {VG: "vg", Name: "x", Size: 1, ThinPool: "p"}} {
		if err := c.CheckPlacement(ctx, o); err != nil {
			t.Errorf("CheckPlacement(%+v) = %v", o, err)
		}
	}
}

func TestListVGPVs(t *testing.T) {
	c := newFake(t,
		step{args: pvsArgs(), out: "@partial-pvs"},
		step{args: pvsArgs(), out: "@striped-pvs"},
	)
	pvs, err := c.ListVGPVs(ctx, "carve-partial")
	if err != nil || len(pvs) != 2 || !pvs[0].Allocatable() || pvs[1].Allocatable() {
		t.Errorf("ListVGPVs = %+v, %v", pvs, err)
	}
	if pvs, err := c.ListVGPVs(ctx, "other"); err != nil || len(pvs) != 0 {
		t.Errorf("other VG: %+v, %v", pvs, err)
	}
	if _, err := c.ListVGPVs(ctx, "bad/vg"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
}

func TestFormatSize(t *testing.T) {
	for in, want := range map[uint64]string{
		0: "0 B", 512: "512 B", 4096: "4 KiB", 1536 * mib: "1.5 GiB", 516 * mib: "516 MiB",
		gib + 4*mib: "1.01 GiB", gib + 1: "1.01 GiB", ^uint64(0): "16 EiB",
	} {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", in, got, want)
		}
	}
}
