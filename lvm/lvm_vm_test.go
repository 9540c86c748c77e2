//go:build vmtest

// Integration test against real lvm2 and device-mapper. It destroys the disks
// named by CARVE_TEST_DISK and CARVE_TEST_DISK2 (the second one for raid1 and
// striped LVs; those tests skip without it), so it only builds with -tags
// vmtest and is meant for a throw-away VM:
//
//	CGO_ENABLED=0 go test -tags vmtest -c -o /tmp/lvm.test ./lvm
//	CARVE_TEST_DISK=/dev/vda CARVE_TEST_DISK2=/dev/vdb scripts/vm/run.sh --disks 2 -- /tmp/lvm.test -test.v
package lvm

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"carve.dev/carve/lvm/runner"
	fixtures "carve.dev/carve/test/fixture"
)

const vmVG = "carve-vmtest"

// The unit tests in this binary read testdata/ relative to the package
// directory; run.sh starts the binary in the repository root.
func init() {
	if _, err := os.Stat("testdata"); err != nil {
		if _, err := os.Stat("lvm/testdata"); err == nil {
			_ = os.Chdir("lvm")
		}
	}
}

// vmClient makes a VG on CARVE_TEST_DISK under a private LVM configuration
// and removes it (and the PV label) when the test ends.
func vmClient(t *testing.T) (*Client, runner.Runner) {
	t.Helper()
	disk := os.Getenv("CARVE_TEST_DISK")
	if disk == "" {
		fixtures.Missing(t, "CARVE_TEST_DISK is unset: name a blank disk this test may wipe, e.g. CARVE_TEST_DISK=/dev/vdb inside the test VM")
	}
	return newVMClient(t, disk)
}

// vmClient2 is vmClient with a VG on two disks, CARVE_TEST_DISK and
// CARVE_TEST_DISK2, for raid1 and striped LVs.
func vmClient2(t *testing.T) (*Client, runner.Runner) {
	t.Helper()
	disk, disk2 := os.Getenv("CARVE_TEST_DISK"), os.Getenv("CARVE_TEST_DISK2")
	if disk == "" || disk2 == "" {
		fixtures.Missing(t, "CARVE_TEST_DISK or CARVE_TEST_DISK2 is unset: raid1 and striped LVs need two blank disks")
	}
	return newVMClient(t, disk, disk2)
}

func newVMClient(t *testing.T, disks ...string) (*Client, runner.Runner) {
	t.Helper()
	env, err := WritePrivateConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := runner.New(2*time.Minute, env...)
	c := New(r)
	ctx := context.Background()
	if err := c.CreateVG(ctx, vmVG, disks...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.RemoveVG(ctx, vmVG); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := c.RemovePVs(ctx, disks...); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return c, r
}

func mustExist(t *testing.T, path string, want bool) {
	t.Helper()
	_, err := os.Stat(path)
	if got := err == nil; got != want {
		t.Fatalf("device node %s exists = %v, want %v (%v)", path, got, want, err)
	}
}

func TestVMLifecycle(t *testing.T) {
	c, _ := vmClient(t)
	ctx := context.Background()

	vg, err := c.GetVG(ctx, vmVG)
	if err != nil {
		t.Fatal(err)
	}
	ext := vg.ExtentSize
	if ext == 0 || vg.LVCount != 0 || vg.Free != vg.Size {
		t.Fatalf("new VG = %+v", vg)
	}

	// Create: size rounded up to whole extents, tags set, active.
	lv, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "vol1", Size: 2*ext + 1,
		Tags: []string{"carve.dev/volume=pvc-1", "owner=a"}})
	if err != nil {
		t.Fatal(err)
	}
	if lv.Size != 3*ext || !lv.HasTag("carve.dev/volume=pvc-1") || !lv.HasTag("owner=a") ||
		!lv.Active || lv.Open || lv.Layout != "linear" || lv.Path != "/dev/"+vmVG+"/vol1" {
		t.Fatalf("created LV = %+v", lv)
	}
	mustExist(t, lv.Path, true)

	t.Run("reports", func(t *testing.T) {
		lvs, err := c.ListLVs(ctx, vmVG)
		if err != nil || len(lvs) != 1 || lvs[0].UUID != lv.UUID {
			t.Errorf("ListLVs = %+v, %v", lvs, err)
		}
		vgs, err := c.ListVGs(ctx)
		if err != nil || indexVG(vgs, vmVG) < 0 {
			t.Errorf("ListVGs = %+v, %v", vgs, err)
		}
		pvs, err := c.ListPVs(ctx)
		if err != nil || !hasPV(pvs, os.Getenv("CARVE_TEST_DISK"), vmVG) {
			t.Errorf("ListPVs = %+v, %v", pvs, err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "vol1", Size: ext})
		if !errors.Is(err, ErrAlreadyExists) {
			t.Errorf("create twice: %v, want ErrAlreadyExists", err)
		}
		_, err = c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "huge", Size: vg.Size * 2})
		if !errors.Is(err, ErrNoSpace) {
			t.Errorf("create too large: %v, want ErrNoSpace", err)
		}
		if err := c.ExtendLV(ctx, vmVG, "vol1", vg.Size*2); !errors.Is(err, ErrNoSpace) {
			t.Errorf("extend too large: %v, want ErrNoSpace", err)
		}
		if _, err := c.GetLV(ctx, vmVG, "nosuchlv"); !errors.Is(err, ErrNotFound) {
			t.Errorf("get missing LV: %v, want ErrNotFound", err)
		}
		if _, err := c.GetVG(ctx, "carve-nosuchvg"); !errors.Is(err, ErrNotFound) {
			t.Errorf("get missing VG: %v, want ErrNotFound", err)
		}
		if _, err := c.GetLV(ctx, "carve-nosuchvg", "vol1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("get LV of missing VG: %v, want ErrNotFound", err)
		}
		if err := c.Deactivate(ctx, vmVG, "nosuchlv"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deactivate missing LV: %v, want ErrNotFound", err)
		}
		if _, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "bad_tmeta", Size: ext}); !errors.Is(err, ErrInvalidName) {
			t.Errorf("reserved name: %v, want ErrInvalidName", err)
		}
	})

	t.Run("extend", func(t *testing.T) {
		if err := c.ExtendLV(ctx, vmVG, "vol1", 4*ext-1); err != nil {
			t.Fatal(err)
		}
		if got := getLV(t, c, "vol1").Size; got != 4*ext {
			t.Fatalf("size after extend = %d, want %d", got, 4*ext)
		}
		if err := c.ExtendLV(ctx, vmVG, "vol1", ext); err != nil {
			t.Fatal(err)
		}
		if got := getLV(t, c, "vol1").Size; got != 4*ext {
			t.Fatalf("a smaller extend changed the size to %d", got)
		}
	})

	t.Run("tags", func(t *testing.T) {
		if err := c.AddTags(ctx, vmVG, "vol1", "x=1", "y"); err != nil {
			t.Fatal(err)
		}
		if err := c.RemoveTags(ctx, vmVG, "vol1", "owner=a", "y"); err != nil {
			t.Fatal(err)
		}
		got := getLV(t, c, "vol1")
		if !got.HasTag("x=1") || got.HasTag("y") || got.HasTag("owner=a") || !got.HasTag("carve.dev/volume=pvc-1") {
			t.Fatalf("tags = %v", got.Tags)
		}
	})

	t.Run("busy", func(t *testing.T) {
		f, err := os.Open(lv.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !getLV(t, c, "vol1").Open {
			t.Error("LV held open is not reported Open")
		}
		if err := c.Deactivate(ctx, vmVG, "vol1"); !errors.Is(err, ErrBusy) {
			t.Errorf("deactivate open LV: %v, want ErrBusy", err)
		}
		if err := c.RemoveLV(ctx, vmVG, "vol1"); !errors.Is(err, ErrBusy) {
			t.Errorf("remove open LV: %v, want ErrBusy", err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("activation", func(t *testing.T) {
		if err := c.Deactivate(ctx, vmVG, "vol1"); err != nil {
			t.Fatal(err)
		}
		if getLV(t, c, "vol1").Active {
			t.Error("still active after Deactivate")
		}
		mustExist(t, lv.Path, false)
		if err := c.Deactivate(ctx, vmVG, "vol1"); err != nil {
			t.Errorf("second Deactivate: %v", err)
		}
		if err := c.Activate(ctx, vmVG, "vol1"); err != nil {
			t.Fatal(err)
		}
		if !getLV(t, c, "vol1").Active {
			t.Error("not active after Activate")
		}
		mustExist(t, lv.Path, true)
	})

	t.Run("snapshot dependents", func(t *testing.T) {
		if _, err := c.CreateCOWSnapshot(ctx, vmVG, "vol1", "snap1", 2*ext); err != nil {
			t.Fatal(err)
		}
		err := c.RemoveLV(ctx, vmVG, "vol1")
		if !errors.Is(err, ErrHasDependents) || !errors.Is(err, ErrBusy) {
			t.Errorf("remove origin: %v, want ErrHasDependents", err)
		}
		snap := getLV(t, c, "snap1")
		if !snap.IsCOWSnapshot() || snap.Origin != "vol1" {
			t.Errorf("snapshot = %+v", snap)
		}
		if err := c.RemoveLV(ctx, vmVG, "snap1"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("remove", func(t *testing.T) {
		// Active, not open: lvremove --yes deactivates it itself
		// (DeleteVolume relies on that after its wipe).
		if !getLV(t, c, "vol1").Active {
			t.Fatal("vol1 should be active before the remove")
		}
		if err := c.RemoveLV(ctx, vmVG, "vol1"); err != nil {
			t.Fatal(err)
		}
		mustExist(t, lv.Path, false)
		if _, err := c.GetLV(ctx, vmVG, "vol1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("get removed LV: %v, want ErrNotFound", err)
		}
		if err := c.RemoveLV(ctx, vmVG, "vol1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("remove twice: %v, want ErrNotFound", err)
		}
	})
}

func getLV(t *testing.T, c *Client, name string) LV {
	t.Helper()
	lv, err := c.GetLV(context.Background(), vmVG, name)
	if err != nil {
		t.Fatal(err)
	}
	return lv
}

func indexVG(vgs []VG, name string) int {
	for i, v := range vgs {
		if v.Name == name {
			return i
		}
	}
	return -1
}

func hasPV(pvs []PV, dev, vg string) bool {
	for _, p := range pvs {
		if p.Name == dev && p.VGName == vg {
			return true
		}
	}
	return false
}
