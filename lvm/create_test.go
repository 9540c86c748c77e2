package lvm

import (
	"errors"
	"strings"
	"testing"
)

func TestCreateLVTypes(t *testing.T) {
	thick := []string{"--zero", "y", "--wipesignatures", "y", "--yes"}
	for _, tc := range []struct {
		name string
		o    CreateLVOptions
		args []string // between "lvcreate -n NAME" and the VG
		lvs  string
	}{
		{"striped rounds to whole stripe rows", CreateLVOptions{VG: "carve-striped", Name: "stripe1", Size: 12 * mib,
			Stripes: 2, StripeSize: 64 << 10, Tags: []string{"t=1"}},
			append(append([]string{"-i", "2", "-I", "65536b", "-L", "16777216b"}, thick...), "--addtag", "t=1"), "@striped-lvs"},
		{"striped, default stripe size", CreateLVOptions{VG: "carve-striped", Name: "stripe2", Size: 1, Stripes: 3},
			append([]string{"-i", "3", "-L", "12582912b"}, thick...), "@striped-lvs"},
		{"raid1", CreateLVOptions{VG: "carve-raid1", Name: "mirror1", Size: 16*mib - 1, Mirrors: 1},
			append([]string{"--type", "raid1", "-m", "1", "-L", "16777216b"}, thick...), "@raid1-lvs"},
		{"raid1 with integrity", CreateLVOptions{VG: "carve-raid1", Name: "mirror1", Size: 16 * mib, Mirrors: 1, Integrity: true},
			append([]string{"--type", "raid1", "-m", "1", "--raidintegrity", "y", "--nosync", "-L", "16777216b"}, thick...), "@raid1-lvs"},
		{"raid5 rounds to whole rows of its data stripes", CreateLVOptions{VG: "carve-striped", Name: "stripe1", Size: 5 * mib,
			RAID: RAID5, Stripes: 2}, append([]string{"--type", "raid5", "-i", "2", "-L", "8388608b"}, thick...), "@striped-lvs"},
		{"raid6 with a stripe size", CreateLVOptions{VG: "carve-striped", Name: "stripe1", Size: 12 * mib,
			RAID: RAID6, Stripes: 3, StripeSize: 128 << 10},
			append([]string{"--type", "raid6", "-i", "3", "-I", "131072b", "-L", "12582912b"}, thick...), "@striped-lvs"},
		{"raid10: two copies of each stripe", CreateLVOptions{VG: "carve-striped", Name: "stripe1", Size: 1,
			RAID: RAID10, Stripes: 2}, append([]string{"--type", "raid10", "-i", "2", "-m", "1", "-L", "8388608b"}, thick...), "@striped-lvs"},
		{"thin: virtual size, no zeroing flags", CreateLVOptions{VG: "carve-thinops", Name: "thin2", Size: 45 * mib,
			ThinPool: "pool0", Tags: []string{"carve.dev/volume=pvc-t"}},
			[]string{"-V", "50331648b", "--thinpool", "pool0", "--yes", "--addtag", "carve.dev/volume=pvc-t"}, "@thinops-lvs"},
		{"stripes 1 is linear", CreateLVOptions{VG: "carve-linear", Name: "vol1", Size: 1, Stripes: 1},
			append([]string{"-L", "4194304b"}, thick...), "@linear-lvs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vgFixture := "@" + strings.TrimPrefix(tc.o.VG, "carve-") + "-vg"
			cmd := append(append([]string{"lvcreate", "-n", tc.o.Name}, tc.args...), tc.o.VG)
			c := newFake(t,
				step{args: vgsArgs(tc.o.VG), out: vgFixture},
				step{args: cmd},
				step{args: lvsArgs(tc.o.VG + "/" + tc.o.Name), out: tc.lvs},
			)
			lv, err := c.CreateLV(ctx, tc.o)
			if err != nil || lv.Name != tc.o.Name {
				t.Errorf("CreateLV = %+v, %v", lv, err)
			}
		})
	}
}

func TestCreateLVRefusesBadTypes(t *testing.T) {
	c := newFake(t) // nothing may run
	base := CreateLVOptions{VG: "vg", Name: "x", Size: mib}
	for _, mod := range []func(o *CreateLVOptions){
		func(o *CreateLVOptions) { o.Size = 0 },
		func(o *CreateLVOptions) { o.Stripes, o.Mirrors = 2, 1 },
		func(o *CreateLVOptions) { o.Mirrors, o.ThinPool = 1, "pool0" },
		func(o *CreateLVOptions) { o.Stripes, o.ThinPool = 2, "pool0" },
		func(o *CreateLVOptions) { o.Stripes = -1 },
		func(o *CreateLVOptions) { o.Stripes = maxStripes + 1 },
		func(o *CreateLVOptions) { o.Mirrors = -1 },
		func(o *CreateLVOptions) { o.Mirrors = maxMirrors + 1 },
		func(o *CreateLVOptions) { o.StripeSize = 64 << 10 }, // without stripes
		func(o *CreateLVOptions) { o.Stripes, o.StripeSize = 2, 3000 },
		func(o *CreateLVOptions) { o.Stripes, o.StripeSize = 2, 2048 },
		func(o *CreateLVOptions) { o.RAID, o.Stripes = "raid4", 2 },
		func(o *CreateLVOptions) { o.RAID, o.Stripes = "raid5; rm -rf", 2 },
		func(o *CreateLVOptions) { o.RAID, o.Stripes = RAID5, 1 },
		func(o *CreateLVOptions) { o.RAID, o.Stripes = RAID6, 2 },
		func(o *CreateLVOptions) { o.RAID, o.Stripes = RAID10, 0 },
		func(o *CreateLVOptions) { o.RAID, o.Stripes, o.Mirrors = RAID10, 2, 1 },
		func(o *CreateLVOptions) { o.RAID, o.Stripes, o.ThinPool = RAID5, 2, "pool0" },
		func(o *CreateLVOptions) { o.RAID, o.Stripes = RAID5, maxStripes+1 },
		func(o *CreateLVOptions) { o.Integrity = true },
		func(o *CreateLVOptions) { o.RAID, o.Stripes, o.Integrity = RAID5, 2, true },
	} {
		o := base
		mod(&o)
		_, err := c.CreateLV(ctx, o)
		if !errors.Is(err, ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "lvcreate vg/x: invalid argument: ") {
			t.Errorf("CreateLV(%+v) = %v, want ErrInvalidArgument", o, err)
		}
		if err := c.CheckPlacement(ctx, o); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("CheckPlacement(%+v) = %v, want ErrInvalidArgument", o, err)
		}
	}
	if _, err := c.CreateLV(ctx, CreateLVOptions{VG: "vg", Name: "x", Size: 1, ThinPool: "p_tdata"}); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad pool name: %v, want ErrInvalidName", err)
	}
}

// lvm2 would quietly shrink a stripe size above the extent size.
func TestCreateLVStripeSizeAboveExtent(t *testing.T) {
	c := newFake(t, step{args: vgsArgs("carve-striped"), out: "@striped-vg"})
	_, err := c.CreateLV(ctx, CreateLVOptions{VG: "carve-striped", Name: "s", Size: mib, Stripes: 2, StripeSize: 8 * mib})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("err = %v, want ErrInvalidArgument", err)
	}
}

func TestCreateLVPlacementFailures(t *testing.T) {
	for _, tc := range []struct {
		o      CreateLVOptions
		stderr string
	}{
		{CreateLVOptions{VG: "carve-raid1", Name: "mirror3", Size: 16 * mib, Mirrors: 2}, "@err-raid1-legs"},
		{CreateLVOptions{VG: "carve-striped", Name: "stripe3", Size: 12 * mib, Stripes: 3}, "@err-stripes-pvs"},
		{CreateLVOptions{VG: "carve-thinops", Name: "thin3", Size: 4 * mib, ThinPool: "nopool"}, "@err-thin-nopool"},
	} {
		args, err := tc.o.createArgs(4 * mib)
		if err != nil {
			t.Fatal(err)
		}
		c := newFake(t,
			step{args: vgsArgs(tc.o.VG), out: "@" + strings.TrimPrefix(tc.o.VG, "carve-") + "-vg"},
			step{args: args, stderr: tc.stderr},
		)
		_, err = c.CreateLV(ctx, tc.o)
		want := ErrNoSpace
		if tc.o.ThinPool != "" {
			want = ErrNotFound
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", tc.stderr, err, want)
		}
	}
}

// A thin LV created inactive and not read back is one lvm2 run: what the
// driver's CreateVolume of a thin volume runs after its pool's lvs.
func TestCreateLVInactiveWithoutReadBack(t *testing.T) {
	c := newFake(t, step{args: []string{"lvcreate", "-n", "thin9", "-V", "8388608b", "--thinpool", "pool0", "--yes", "-an",
		"--addtag", "t=1", "carve-thin"}})
	o := CreateLVOptions{VG: "carve-thin", Name: "thin9", Size: 5 * mib, ThinPool: "pool0", Tags: []string{"t=1"},
		ExtentSize: 4 * mib, Inactive: true, SkipReadBack: true}
	lv, err := c.CreateLV(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if lv.Name != "thin9" || lv.VGName != "carve-thin" || lv.Size != 8*mib || lv.Active || lv.PoolLV != "pool0" ||
		!lv.HasTag("t=1") || lv.KernelMajor != -1 {
		t.Errorf("CreateLV = %+v, want the inactive thin LV the options describe", lv)
	}
	thick := CreateLVOptions{VG: "vg", Name: "x", Size: mib, Inactive: true}
	if _, err := c.CreateLV(ctx, thick); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("inactive thick LV: error = %v, want ErrInvalidArgument (lvm2 zeroes it active)", err)
	}
}
