package lvm

import (
	"errors"
	"testing"
)

func TestCreateThinPool(t *testing.T) {
	c := newFake(t,
		step{args: vgsArgs("carve-thinops"), out: "@thinops-vg"},
		step{args: []string{"lvcreate", "--type", "thin-pool", "-n", "pool0", "-L", "67108864b", "--zero", "y", "--yes",
			"--addtag", "carve.dev/pool=p0", "carve-thinops"}},
		step{args: lvsArgs("carve-thinops/pool0"), out: "@thinops-lv-pool0"},
	)
	pool, err := c.CreateThinPool(ctx, "carve-thinops", "pool0", 64*mib-1, "carve.dev/pool=p0")
	if err != nil || !pool.IsThinPool() || !pool.HasTag("carve.dev/pool=p0") {
		t.Errorf("CreateThinPool = %+v, %v", pool, err)
	}
	for _, bad := range []error{
		func() error { _, err := c.CreateThinPool(ctx, "vg", "p", 0); return err }(),
		func() error { _, err := c.CreateThinPool(ctx, "vg", "p_tmeta", mib); return err }(),
		func() error { _, err := c.CreateThinPool(ctx, "vg", "p", mib, "-x"); return err }(),
	} {
		if !errors.Is(bad, ErrInvalidArgument) && !errors.Is(bad, ErrInvalidName) {
			t.Errorf("bad request: %v", bad)
		}
	}
}

func TestCreateThinSnapshot(t *testing.T) {
	c := newFake(t,
		step{args: lvsArgs("carve-thin/thin1"), out: "@thin-lvs"},
		step{args: []string{"lvcreate", "-s", "-n", "thinsnap2", "-kn", "--yes", "--addtag", "s=1", "carve-thin/thin1"}},
		step{args: lvsArgs("carve-thin/thinsnap2"), out: "@thin-lvs"},
		// A thick origin is refused before lvcreate.
		step{args: lvsArgs("carve-linear/vol1"), out: "@linear-lv-vol1"},
		step{args: lvsArgs("carve-thin/nosuchlv"), stderr: "@err-lv-notfound"},
	)
	snap, err := c.CreateThinSnapshot(ctx, "carve-thin", "thin1", "thinsnap2", "s=1")
	if err != nil || snap.Origin != "thin1" || snap.SkipActivation {
		t.Errorf("CreateThinSnapshot = %+v, %v", snap, err)
	}
	if _, err := c.CreateThinSnapshot(ctx, "carve-linear", "vol1", "s"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("thick origin: %v, want ErrInvalidArgument", err)
	}
	if _, err := c.CreateThinSnapshot(ctx, "carve-thin", "nosuchlv", "s"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing origin: %v, want ErrNotFound", err)
	}
	if _, err := c.CreateThinSnapshot(ctx, "carve-thin", "thin1", "snapshot1"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("reserved name: %v, want ErrInvalidName", err)
	}
	if _, err := c.CreateThinSnapshot(ctx, "carve-thin", "thin1", "s", "bad tag"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad tag: %v, want ErrInvalidName", err)
	}
}

func TestCreateCOWSnapshot(t *testing.T) {
	c := newFake(t,
		step{args: lvsArgs("carve-cow/origin1"), out: "@cow-lvs"},
		step{args: []string{"lvcreate", "-s", "-n", "snap1", "-L", "25165824b", "--yes", "carve-cow/origin1"}},
		step{args: lvsArgs("carve-cow/snap1"), out: "@cow-lvs"},
		// Thin LVs, pools and snapshots are no COW origins.
		step{args: lvsArgs("carve-thin/thin1"), out: "@thin-lvs"},
		step{args: lvsArgs("carve-thin/pool0"), out: "@thin-lvs"},
		step{args: lvsArgs("carve-cow/snap1"), out: "@cow-lvs"},
	)
	snap, err := c.CreateCOWSnapshot(ctx, "carve-cow", "origin1", "snap1", 20*mib+1)
	if err != nil || !snap.IsCOWSnapshot() || snap.Origin != "origin1" || snap.Size != 24*mib {
		t.Errorf("CreateCOWSnapshot = %+v, %v", snap, err)
	}
	for _, origin := range []struct{ vg, lv string }{{"carve-thin", "thin1"}, {"carve-thin", "pool0"}, {"carve-cow", "snap1"}} {
		if _, err := c.CreateCOWSnapshot(ctx, origin.vg, origin.lv, "s", mib); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("origin %s: %v, want ErrInvalidArgument", origin.lv, err)
		}
	}
	if _, err := c.CreateCOWSnapshot(ctx, "carve-cow", "origin1", "s", 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("size 0: %v, want ErrInvalidArgument", err)
	}
}

func TestRemoveLVSnapshotsAndThin(t *testing.T) {
	c := newFake(t,
		// A COW snapshot goes alone; its origin stays.
		step{args: lvsArgs("carve-cow"), out: "@cow-lvs"},
		step{args: []string{"lvremove", "--yes", "carve-cow/snap2"}},
		// A thin snapshot whose origin was removed.
		step{args: lvsArgs("carve-thinops"), out: "@thinops-lvs"},
		step{args: []string{"lvremove", "--yes", "carve-thinops/snap1"}},
		// A thin LV; its pool stays.
		step{args: lvsArgs("carve-thinops"), out: "@thinops-lvs"},
		step{args: []string{"lvremove", "--yes", "carve-thinops/thin2"}},
	)
	for _, lv := range []struct{ vg, name string }{{"carve-cow", "snap2"}, {"carve-thinops", "snap1"}, {"carve-thinops", "thin2"}} {
		if err := c.RemoveLV(ctx, lv.vg, lv.name); err != nil {
			t.Errorf("RemoveLV %s: %v", lv.name, err)
		}
	}
}

func TestExtendLVTypes(t *testing.T) {
	c := newFake(t,
		// Thin: the virtual size grows.
		step{args: lvsArgs("carve-thin/thin1"), out: "@thin-lvs"},
		step{args: []string{"lvextend", "-L", "41943040b", "carve-thin/thin1"}},
		// Striped and raid1: lvextend keeps the type (and rounds stripes).
		step{args: lvsArgs("carve-striped/stripe1"), out: "@striped-lvs"},
		step{args: []string{"lvextend", "-L", "20971520b", "carve-striped/stripe1"}},
		step{args: lvsArgs("carve-raid1/mirror1"), out: "@raid1-lvs"},
		step{args: []string{"lvextend", "-L", "33554432b", "carve-raid1/mirror1"}},
		// An active origin of COW snapshots cannot grow.
		step{args: lvsArgs("carve-cow/origin1"), out: "@cow-lvs"},
		step{args: []string{"lvextend", "-L", "67108864b", "carve-cow/origin1"}, stderr: "@err-busy-extend-origin"},
	)
	if err := c.ExtendLV(ctx, "carve-thin", "thin1", 40*mib); err != nil {
		t.Error(err)
	}
	if err := c.ExtendLV(ctx, "carve-striped", "stripe1", 20*mib-1); err != nil {
		t.Error(err)
	}
	if err := c.ExtendLV(ctx, "carve-raid1", "mirror1", 32*mib); err != nil {
		t.Error(err)
	}
	if err := c.ExtendLV(ctx, "carve-cow", "origin1", 64*mib); !errors.Is(err, ErrBusy) {
		t.Errorf("COW origin: %v, want ErrBusy", err)
	}
	if err := c.ExtendLV(ctx, "vg", "lv", 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("size 0: %v, want ErrInvalidArgument", err)
	}
}

// Snapshots of an origin the caller has read: lvcreate alone, no lvs of
// the origin, none of the snapshot with SkipReadBack.
func TestCreateSnapshotOf(t *testing.T) {
	thin := LV{VGName: "carve-thin", Name: "thin1", Attr: "Vwi-a-tz--", Size: 8 * mib, PoolLV: "pool0", ExtentSize: 4 * mib}
	thick := LV{VGName: "carve-cow", Name: "origin1", Attr: "-wi-a-----", Size: 8 * mib, ExtentSize: 4 * mib}
	c := newFake(t,
		step{args: []string{"lvcreate", "-s", "-n", "s1", "-kn", "-an", "--yes", "--addtag", "a", "carve-thin/thin1"}},
		step{args: []string{"lvcreate", "-s", "-n", "f1", "-L", "8388608b", "--yes", "carve-cow/origin1"}},
		step{args: []string{"lvcreate", "-s", "-n", "f2", "-L", "8388608b", "--chunksize", "64k", "--yes", "carve-cow/origin1"}},
		step{args: []string{"lvcreate", "-s", "-n", "thinsnap2", "-kn", "--yes", "carve-thin/thin1"}},
		step{args: lvsArgs("carve-thin/thinsnap2"), out: "@thin-lvs"},
	)
	snap, err := c.CreateSnapshotOf(ctx, thin, "s1", SnapshotOptions{Tags: []string{"a"}, Inactive: true, SkipReadBack: true})
	if err != nil || snap.Active || snap.Size != thin.Size || snap.PoolLV != "pool0" || snap.Origin != "thin1" || !snap.HasTag("a") {
		t.Errorf("thin CreateSnapshotOf = %+v, %v", snap, err)
	}
	cow, err := c.CreateSnapshotOf(ctx, thick, "f1", SnapshotOptions{COWSize: 5 * mib, SkipReadBack: true})
	if err != nil || !cow.Active || cow.Size != 8*mib || cow.Origin != "origin1" {
		t.Errorf("COW CreateSnapshotOf = %+v, %v", cow, err)
	}
	if _, err := c.CreateSnapshotOf(ctx, thick, "f2", SnapshotOptions{COWSize: 5 * mib, ChunkSize: 64 << 10, SkipReadBack: true}); err != nil {
		t.Errorf("COW CreateSnapshotOf with a chunk size: %v", err)
	}
	if snap, err := c.CreateSnapshotOf(ctx, thin, "thinsnap2", SnapshotOptions{}); err != nil || snap.Name != "thinsnap2" {
		t.Errorf("read back: %+v, %v", snap, err)
	}
	for name, bad := range map[string]func() error{
		"thin of thick": func() error { _, err := c.CreateSnapshotOf(ctx, thick, "s", SnapshotOptions{}); return err },
		"COW of thin":   func() error { _, err := c.CreateSnapshotOf(ctx, thin, "s", SnapshotOptions{COWSize: mib}); return err },
		"chunk of 3 KiB": func() error {
			_, err := c.CreateSnapshotOf(ctx, thick, "s", SnapshotOptions{COWSize: mib, ChunkSize: 3 << 10})
			return err
		},
		"chunk of 1 MiB": func() error {
			_, err := c.CreateSnapshotOf(ctx, thick, "s", SnapshotOptions{COWSize: mib, ChunkSize: 1 << 20})
			return err
		},
		"inactive COW": func() error {
			_, err := c.CreateSnapshotOf(ctx, thick, "s", SnapshotOptions{COWSize: mib, Inactive: true})
			return err
		},
	} {
		if err := bad(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: error = %v, want ErrInvalidArgument before lvcreate", name, err)
		}
	}
}
