package lvm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"carve.dev/carve/lvm/runner"
)

var ctx = context.Background()

func TestCreateLV(t *testing.T) {
	c := newFake(t,
		step{args: vgsArgs("carve-linear"), out: "@linear-vg"},
		step{args: []string{"lvcreate", "-n", "vol1", "-L", "12582912b", "--zero", "y", "--wipesignatures", "y", "--yes",
			"--addtag", "carve.dev/volume=pvc-1", "--addtag", "owner=node-a", "carve-linear"}},
		step{args: lvsArgs("carve-linear/vol1"), out: "@linear-lv-vol1"},
	)
	lv, err := c.CreateLV(ctx, CreateLVOptions{VG: "carve-linear", Name: "vol1", Size: 8*mib + 1,
		Tags: []string{"carve.dev/volume=pvc-1", "owner=node-a"}})
	if err != nil {
		t.Fatal(err)
	}
	if lv.Name != "vol1" || lv.Size != 12*mib || !lv.HasTag("owner=node-a") {
		t.Errorf("CreateLV = %+v", lv)
	}
}

func TestCreateLVRefusesBeforeRunning(t *testing.T) {
	c := newFake(t) // any command fails the test
	for _, o := range []CreateLVOptions{
		{VG: "vg", Name: "snapshot1", Size: mib},
		{VG: "-vg", Name: "x", Size: mib},
		{VG: "vg", Name: "x", Size: mib, Tags: []string{"bad tag"}},
	} {
		if _, err := c.CreateLV(ctx, o); !errors.Is(err, ErrInvalidName) {
			t.Errorf("CreateLV(%+v) = %v, want ErrInvalidName", o, err)
		}
	}
	if _, err := c.CreateLV(ctx, CreateLVOptions{VG: "vg", Name: "x"}); err == nil {
		t.Error("CreateLV with size 0 succeeded")
	}
}

func TestCreateLVFailures(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		want   error
	}{
		{"@err-nospace-create", ErrNoSpace},
		{"@err-exists", ErrAlreadyExists},
	} {
		c := newFake(t,
			step{args: vgsArgs("carve-linear"), out: "@linear-vg"},
			step{args: []string{"lvcreate", "-n", "big", "-L", "4194304b", "--zero", "y", "--wipesignatures", "y", "--yes", "carve-linear"},
				stderr: tc.stderr},
		)
		_, err := c.CreateLV(ctx, CreateLVOptions{VG: "carve-linear", Name: "big", Size: 1})
		if !errors.Is(err, tc.want) || !strings.HasPrefix(err.Error(), "lvcreate carve-linear/big: lvm lvcreate -n big") {
			t.Errorf("%s: err = %v, want %v", tc.stderr, err, tc.want)
		}
		var rerr *runner.Error
		if !errors.As(err, &rerr) || rerr.Stderr == "" {
			t.Errorf("%s: *runner.Error with stderr not in the chain", tc.stderr)
		}
	}
}

func TestCreateLVMissingVG(t *testing.T) {
	c := newFake(t, step{args: vgsArgs("carve-nosuchvg"), stderr: "@err-vg-notfound"})
	if _, err := c.CreateLV(ctx, CreateLVOptions{VG: "carve-nosuchvg", Name: "x", Size: 1}); !errors.Is(err, ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
}

func TestGetLV(t *testing.T) {
	c := newFake(t,
		step{args: lvsArgs("carve-linear/vol1"), out: "@linear-lv-vol1"},
		step{args: lvsArgs("carve-linear/nosuchlv"), stderr: "@err-lv-notfound"},
		step{args: lvsArgs("carve-empty/x"), out: "@empty-lvs"},
	)
	if lv, err := c.GetLV(ctx, "carve-linear", "vol1"); err != nil || !lv.Open {
		t.Errorf("GetLV = %+v, %v", lv, err)
	}
	if _, err := c.GetLV(ctx, "carve-linear", "nosuchlv"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing LV: %v", err)
	}
	if _, err := c.GetLV(ctx, "carve-empty", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("empty report: %v", err)
	}
}

func TestListLVs(t *testing.T) {
	c := newFake(t,
		step{args: lvsArgs("carve-thin"), out: "@thin-lvs"},
		step{args: lvsArgs("-a", "carve-thin"), out: "@thin-lvs-all"},
	)
	lvs, err := c.ListLVs(ctx, "carve-thin")
	if err != nil || len(lvs) != 4 {
		t.Errorf("ListLVs = %d LVs, %v", len(lvs), err)
	}
	all, err := c.ListAllLVs(ctx, "carve-thin")
	if err != nil || len(all) != 7 {
		t.Errorf("ListAllLVs = %d LVs, %v", len(all), err)
	}
}

func TestGetVGAndLists(t *testing.T) {
	c := newFake(t,
		step{args: vgsArgs("carve-empty"), out: "@empty-vg"},
		step{args: vgsArgs("carve-nosuchvg"), stderr: "@err-vg-notfound"},
		step{args: vgsArgs(), out: "@empty-vgs"},
		step{args: pvsArgs(), out: "@striped-pvs"},
	)
	if vg, err := c.GetVG(ctx, "carve-empty"); err != nil || vg.ExtentSize != 4*mib || vg.LVCount != 0 {
		t.Errorf("GetVG = %+v, %v", vg, err)
	}
	if _, err := c.GetVG(ctx, "carve-nosuchvg"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing VG: %v", err)
	}
	if vgs, err := c.ListVGs(ctx); err != nil || len(vgs) != 1 {
		t.Errorf("ListVGs = %v, %v", vgs, err)
	}
	if pvs, err := c.ListPVs(ctx); err != nil || len(pvs) != 2 || pvs[1].Name != "/dev/vdb" {
		t.Errorf("ListPVs = %v, %v", pvs, err)
	}
}

func TestRemoveLV(t *testing.T) {
	c := newFake(t,
		step{args: lvsArgs("carve-linear"), out: "@linear-lvs"},
		step{args: []string{"lvremove", "--yes", "carve-linear/vol3"}},
		step{args: lvsArgs("carve-linear"), out: "@linear-lvs"},
		step{args: lvsArgs("carve-linear"), out: "@linear-lvs"},
		step{args: []string{"lvremove", "--yes", "carve-linear/vol1"}, stderr: "@err-busy-remove"},
	)
	if err := c.RemoveLV(ctx, "carve-linear", "vol3"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveLV(ctx, "carve-linear", "nosuchlv"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing LV: %v, want ErrNotFound", err)
	}
	if err := c.RemoveLV(ctx, "carve-linear", "vol1"); !errors.Is(err, ErrBusy) {
		t.Errorf("open LV: %v, want ErrBusy", err)
	}
}

// lvremove --yes would silently take snapshots or thin volumes with it.
func TestRemoveLVRefusesDependents(t *testing.T) {
	c := newFake(t,
		step{args: lvsArgs("carve-cow"), out: "@cow-lvs"},
		step{args: lvsArgs("carve-thin"), out: "@thin-lvs"},
		step{args: lvsArgs("carve-thin"), out: "@thin-lvs"},
		// A thin origin's snapshots are independent of it: removal goes ahead.
		step{args: []string{"lvremove", "--yes", "carve-thin/thin1"}},
	)
	err := c.RemoveLV(ctx, "carve-cow", "origin1")
	if !errors.Is(err, ErrHasDependents) || !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "snap1, snap2") {
		t.Errorf("COW origin: %v", err)
	}
	err = c.RemoveLV(ctx, "carve-thin", "pool0")
	if !errors.Is(err, ErrHasDependents) || !strings.Contains(err.Error(), "thin1, thinsnap1, thinsnap2") {
		t.Errorf("thin pool: %v", err)
	}
	if err := c.RemoveLV(ctx, "carve-thin", "thin1"); err != nil {
		t.Errorf("thin origin: %v", err)
	}
}

func TestExtendLV(t *testing.T) {
	c := newFake(t,
		step{args: lvsArgs("carve-linear/vol1"), out: "@linear-lv-vol1"}, // 12 MiB already
		step{args: lvsArgs("carve-linear/vol1"), out: "@linear-lv-vol1"},
		step{args: []string{"lvextend", "-L", "16777216b", "carve-linear/vol1"}},
		step{args: lvsArgs("carve-linear/vol1"), out: "@linear-lv-vol1"},
		step{args: []string{"lvextend", "-L", "107374182400b", "carve-linear/vol1"}, stderr: "@err-nospace-extend"},
	)
	if err := c.ExtendLV(ctx, "carve-linear", "vol1", 12*mib); err != nil {
		t.Fatal(err)
	}
	if err := c.ExtendLV(ctx, "carve-linear", "vol1", 12*mib+1); err != nil {
		t.Fatal(err)
	}
	if err := c.ExtendLV(ctx, "carve-linear", "vol1", 100<<30); !errors.Is(err, ErrNoSpace) {
		t.Errorf("err = %v, want ErrNoSpace", err)
	}
	if err := c.ExtendLV(ctx, "carve-linear", "vol1", 0); err == nil {
		t.Error("ExtendLV to 0 succeeded")
	}
}

func TestActivation(t *testing.T) {
	c := newFake(t,
		step{args: []string{"lvchange", "-ay", "-K", "carve-thin/thinsnap1"}},
		step{args: []string{"lvchange", "-an", "carve-linear/vol3"}},
		step{args: []string{"lvchange", "-an", "carve-linear/vol1"}, stderr: "@err-busy-deactivate"},
	)
	if err := c.Activate(ctx, "carve-thin", "thinsnap1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Deactivate(ctx, "carve-linear", "vol3"); err != nil {
		t.Fatal(err)
	}
	err := c.Deactivate(ctx, "carve-linear", "vol1")
	if !errors.Is(err, ErrBusy) || !strings.HasPrefix(err.Error(), "lvchange (deactivate) carve-linear/vol1: ") {
		t.Errorf("err = %v, want ErrBusy", err)
	}
	if err := c.Activate(ctx, "vg", "a b"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
}

func TestTags(t *testing.T) {
	c := newFake(t,
		step{args: []string{"lvchange", "--addtag", "a=1", "--addtag", "b", "vg/lv"}},
		step{args: []string{"lvchange", "--deltag", "a=1", "vg/lv"}},
	)
	if err := c.AddTags(ctx, "vg", "lv", "a=1", "b"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveTags(ctx, "vg", "lv", "a=1"); err != nil {
		t.Fatal(err)
	}
	if err := c.AddTags(ctx, "vg", "lv"); err != nil {
		t.Errorf("no tags: %v", err)
	}
	if err := c.AddTags(ctx, "vg", "lv", "ok", "-bad"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad tag: %v", err)
	}
	if err := c.RemoveTags(ctx, "vg", "lv_tmeta"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name with no tags: %v", err)
	}
}

func TestVGAndPVCommands(t *testing.T) {
	c := newFake(t,
		step{args: []string{"vgcreate", "--yes", "vg0", "/dev/vdb", "/dev/vdc"}},
		step{args: []string{"vgextend", "-qq", "vg0", "/dev/vdd"}},
		step{args: []string{"vgcreate", "-qq", "vg1", "/dev/vde"}},
		step{args: []string{"vgremove", "--yes", "vg0"}},
		step{args: []string{"pvremove", "--yes", "/dev/vdb"}},
	)
	if err := c.CreateVG(ctx, "vg0", "/dev/vdb", "/dev/vdc"); err != nil {
		t.Fatal(err)
	}
	if err := c.ExtendVGOnBlank(ctx, "vg0", "/dev/vdd"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateVGOnBlank(ctx, "vg1", "/dev/vde"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveVG(ctx, "vg0"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemovePVs(ctx, "/dev/vdb"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateVG(ctx, "vg0"); err == nil {
		t.Error("CreateVG without devices succeeded")
	}
	if err := c.ExtendVGOnBlank(ctx, "vg0"); err == nil {
		t.Error("ExtendVGOnBlank without devices succeeded")
	}
	if err := c.CreateVGOnBlank(ctx, "-vg", "/dev/vdd"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("CreateVGOnBlank of a bad VG name: %v", err)
	}
}

func TestRemoveLVOfAndRetag(t *testing.T) {
	c := newFake(t,
		step{args: []string{"lvremove", "--yes", "carve-linear/vol1"}},
		step{args: []string{"lvchange", "--addtag", "a", "--deltag", "b", "-ay", "carve-linear/vol1"}},
		step{args: []string{"lvchange", "--deltag", "b", "-an", "carve-linear/vol1"}},
	)
	if err := c.RemoveLVOf(ctx, LV{VGName: "carve-linear", Name: "vol1", Attr: "-wi-a-----"}); err != nil {
		t.Errorf("RemoveLVOf: %v", err)
	}
	if err := c.RemoveLVOf(ctx, LV{VGName: "carve-linear", Name: "vol1", Attr: "owi-a-----"}); !errors.Is(err, ErrHasDependents) {
		t.Errorf("RemoveLVOf of an origin: %v, want ErrHasDependents before lvremove", err)
	}
	if err := c.RetagAndActivate(ctx, "carve-linear", "vol1", []string{"a"}, []string{"b"}, true); err != nil {
		t.Error(err)
	}
	if err := c.RetagAndActivate(ctx, "carve-linear", "vol1", nil, []string{"b"}, false); err != nil {
		t.Error(err)
	}
	if err := c.RetagAndActivate(ctx, "carve-linear", "vol1", []string{"bad tag"}, nil, true); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad tag: %v", err)
	}
}
