//go:build vmtest

// raid5, raid6 and raid10 against real lvm2 (see lvm_vm_test.go for how
// to run): the largest volume GetCapacity's rule (volume.CapacityOf)
// promises is one lvm2 makes, and the next size up is one that both
// CheckPlacement and lvm2 refuse. An external test package, as
// driver/volume imports lvm.
package lvm_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
	fixtures "carve.dev/carve/test/fixture"
)

// sliceSectors is each PV's size: 512 MiB, small enough that a level's
// largest volume is made (and its initial sync started) in seconds.
const sliceSectors = 512 << 20 >> 9

// slicedVG makes the VM VG on six PVs, three device-mapper linear slices
// of each scratch disk, as raid6 needs five PVs and the suites have two
// disks. lvm2 sees six PVs; which disk holds each does not matter to it.
func slicedVG(t *testing.T) (*lvm.Client, runner.Runner, []string) {
	t.Helper()
	disks := []string{os.Getenv("CARVE_TEST_DISK"), os.Getenv("CARVE_TEST_DISK2")}
	if disks[0] == "" || disks[1] == "" {
		fixtures.Missing(t, "CARVE_TEST_DISK or CARVE_TEST_DISK2 is unset: raid levels need two blank disks")
	}
	dm := runner.New(time.Minute)
	var pvs []string
	for d, disk := range disks {
		for i := 0; i < 3; i++ {
			name := "carve-raid-slice" + strconv.Itoa(d) + strconv.Itoa(i)
			// From 1 MiB in: a PV label at the disk's own start would
			// show lvm2 the disk as a duplicate of the first slice.
			table := "0 " + strconv.Itoa(sliceSectors) + " linear " + disk + " " + strconv.Itoa(2048+i*sliceSectors)
			if _, err := dm.Run(context.Background(), "dmsetup", "create", name, "--table", table); err != nil {
				t.Fatal(err)
			}
			// Registered before the VG's cleanup, so it runs after it.
			t.Cleanup(func() { _, _ = dm.Run(context.Background(), "dmsetup", "remove", "--retry", name) })
			pvs = append(pvs, "/dev/mapper/"+name)
		}
	}
	c, r := lvm.NewVMClient(t, pvs...)
	return c, r, pvs
}

// allocatable lets lvm2 allocate from the first n of pvs only (pvchange
// -x), as if the VG had those alone.
func allocatable(t *testing.T, r runner.Runner, pvs []string, n int) {
	t.Helper()
	for i, pv := range pvs {
		yes := "n"
		if i < n {
			yes = "y"
		}
		if _, err := r.Run(context.Background(), "lvm", "pvchange", "-x", yes, pv); err != nil {
			t.Fatal(err)
		}
	}
}

// space is the VM VG's space as the capacity rules read it.
func space(t *testing.T, c *lvm.Client) volume.VGSpace {
	t.Helper()
	ctx := context.Background()
	vg, err := c.GetVG(ctx, lvm.VMVG)
	if err != nil {
		t.Fatal(err)
	}
	pvs, err := c.ListVGPVs(ctx, lvm.VMVG)
	if err != nil {
		t.Fatal(err)
	}
	s := volume.VGSpace{Name: vg.Name, Size: vg.Size, Free: vg.Free, ExtentSize: vg.ExtentSize}
	for _, pv := range pvs {
		if pv.Allocatable() {
			s.PVFree = append(s.PVFree, pv.Free)
		}
	}
	return s
}

// TestVMRAIDLevelsCapacity: for raid5 (2 data stripes), raid6 (3 and 4)
// and raid10 (2), on as many PVs as the level has images, one of them with
// less free space than the others, the largest volume CapacityOf promises
// passes CheckPlacement, lvm2 creates it taking what Footprint says, and
// a row more (sizes are whole rows of one extent per data stripe) is
// refused by both. With PVs to spare lvm2 can do more than the rule
// says (it may put an image's metadata on a PV of its own): the largest
// promised volume must still be made there, on all six PVs. raid5's
// create and initial sync are timed.
func TestVMRAIDLevelsCapacity(t *testing.T) {
	c, r, pvs := slicedVG(t)
	ctx := context.Background()
	// One PV, the first, with 8 extents fewer free: the K-th largest of
	// the K PVs a level is given.
	ext := space(t, c).ExtentSize
	if _, err := c.CreateLV(ctx, lvm.CreateLVOptions{VG: lvm.VMVG, Name: "filler", Size: 8 * ext}); err != nil {
		t.Fatal(err)
	}
	t.Logf("PVs %v, free %v", pvs, space(t, c).PVFree)
	for _, tc := range []struct {
		level   string
		stripes int
	}{{lvm.RAID5, 2}, {lvm.RAID6, 3}, {lvm.RAID10, 2}, {lvm.RAID6, 4}} {
		t.Run(tc.level+"x"+strconv.Itoa(tc.stripes), func(t *testing.T) {
			spare := space(t, c)
			typ := volume.Type{RAID: tc.level, Stripes: tc.stripes}
			o := lvm.CreateLVOptions{VG: lvm.VMVG, Name: "r", Size: uint64(volume.CapacityOf(spare, typ, 1).MaximumVolumeBytes),
				RAID: tc.level, Stripes: tc.stripes}
			if _, err := c.CreateLV(ctx, o); err != nil {
				t.Fatalf("lvcreate of the largest CapacityOf promises on all six PVs: %v", err)
			}
			if err := c.RemoveLV(ctx, lvm.VMVG, "r"); err != nil {
				t.Fatal(err)
			}
			allocatable(t, r, pvs, lvm.RAIDImages(tc.level, tc.stripes))
			defer allocatable(t, r, pvs, len(pvs))
			s := space(t, c)
			largest := uint64(volume.CapacityOf(s, typ, 1).MaximumVolumeBytes)
			o = lvm.CreateLVOptions{VG: lvm.VMVG, Name: "r", Size: largest, RAID: tc.level, Stripes: tc.stripes, Tags: []string{"t=1"}}
			t.Logf("CapacityOf: largest %s (%d extents)", lvm.FormatSize(largest), largest/s.ExtentSize)
			if largest == 0 {
				t.Fatal("CapacityOf promises nothing")
			}
			if err := c.CheckPlacement(ctx, o); err != nil {
				t.Fatalf("CheckPlacement of the largest: %v", err)
			}
			start := time.Now()
			lv, err := c.CreateLV(ctx, o)
			created := time.Since(start)
			if err != nil {
				t.Fatalf("lvcreate of the largest CapacityOf promises: %v", err)
			}
			t.Logf("lvcreate %s of %s: %s", tc.level, lvm.FormatSize(lv.Size), created.Round(time.Millisecond))
			if lv.Size != largest || !strings.HasPrefix(lv.Layout, "raid,"+tc.level) || !lv.Active {
				t.Errorf("created %+v", lv)
			}
			if taken := s.Free - space(t, c).Free; taken != lvm.Footprint(o, s.ExtentSize) {
				t.Errorf("lvm2 took %d, Footprint says %d", taken, lvm.Footprint(o, s.ExtentSize))
			}
			if tc.level == lvm.RAID5 {
				waitSynced(t, c, start)
			}
			if err := c.RemoveLV(ctx, lvm.VMVG, "r"); err != nil {
				t.Fatal(err)
			}
			o.Size = largest + 1 // rounds up to the next row
			if err := c.CheckPlacement(ctx, o); !errors.Is(err, lvm.ErrNoSpace) {
				t.Errorf("CheckPlacement of a row more: %v, want ErrNoSpace", err)
			}
			if _, err := c.CreateLV(ctx, o); !errors.Is(err, lvm.ErrNoSpace) {
				t.Errorf("lvm2 made a row more than CapacityOf promises: %v", err)
				_ = c.RemoveLV(ctx, lvm.VMVG, "r")
			}
		})
	}
}

// waitSynced waits for the raid LV r to finish its initial sync, and logs
// how long it took since start.
func waitSynced(t *testing.T, c *lvm.Client, start time.Time) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		lv, err := c.GetLV(context.Background(), lvm.VMVG, "r")
		if err != nil {
			t.Fatal(err)
		}
		if lv.SyncPercent >= 100 {
			t.Logf("initial sync of %s done %s after lvcreate began", lvm.FormatSize(lv.Size), time.Since(start).Round(time.Second))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("initial sync at %.2f%% (%s) after 5 minutes", lv.SyncPercent, strings.TrimSpace(lv.SyncAction))
		}
		time.Sleep(time.Second)
	}
}

// TestVMRAID1IntegrityCapacity: raid1 with dm-integrity under each leg, on
// two PVs, one with less free space: the largest volume CapacityOf
// promises (each leg's data, raid metadata extent and integrity metadata
// LV on one PV) passes CheckPlacement, lvm2 makes it taking what Footprint
// says, and a row more is refused by both. The commands run in lvm2
// shells, as carve runs them; lvcreate is timed, and the LV is in sync
// at once (--nosync: see CreateLV).
func TestVMRAID1IntegrityCapacity(t *testing.T) {
	c, r, pvs := slicedVG(t)
	exec, ok := r.(*runner.Exec)
	if !ok {
		t.Fatalf("runner %T, want *runner.Exec", r)
	}
	exec.Shell = runner.NewShell(1)
	t.Cleanup(func() { _ = exec.Shell.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ext := space(t, c).ExtentSize
	allocatable(t, r, pvs, 2)
	defer allocatable(t, r, pvs, len(pvs))
	if _, err := c.CreateLV(ctx, lvm.CreateLVOptions{VG: lvm.VMVG, Name: "filler", Size: 8 * ext}); err != nil {
		t.Fatal(err)
	}
	s := space(t, c)
	typ := volume.Type{Mirrors: 1, Integrity: true}
	largest := uint64(volume.CapacityOf(s, typ, 1).MaximumVolumeBytes)
	t.Logf("PVs free %v: CapacityOf raid1+integrity: largest %s (%d extents)", s.PVFree, lvm.FormatSize(largest), largest/s.ExtentSize)
	if largest == 0 {
		t.Fatal("CapacityOf promises nothing")
	}
	o := lvm.CreateLVOptions{VG: lvm.VMVG, Name: "r", Size: largest, Mirrors: 1, Integrity: true}
	if err := c.CheckPlacement(ctx, o); err != nil {
		t.Fatalf("CheckPlacement of the largest: %v", err)
	}
	start := time.Now()
	lv, err := c.CreateLV(ctx, o)
	if err != nil {
		t.Fatalf("lvcreate of the largest CapacityOf promises: %v", err)
	}
	t.Logf("lvcreate raid1+integrity of %s: %s", lvm.FormatSize(lv.Size), time.Since(start).Round(time.Millisecond))
	if lv.Size != largest || !strings.HasPrefix(lv.Layout, "raid,raid1") || !lv.Active {
		t.Errorf("created %+v", lv)
	}
	if taken := s.Free - space(t, c).Free; taken != lvm.Footprint(o, s.ExtentSize) {
		t.Errorf("lvm2 took %d, Footprint says %d", taken, lvm.Footprint(o, s.ExtentSize))
	}
	if lv.SyncPercent < 100 {
		t.Errorf("created %.1f%% in sync, want 100 (--nosync)", lv.SyncPercent)
	}
	if err := c.RemoveLV(ctx, lvm.VMVG, "r"); err != nil {
		t.Fatal(err)
	}
	o.Size = largest + 1
	if err := c.CheckPlacement(ctx, o); !errors.Is(err, lvm.ErrNoSpace) {
		t.Errorf("CheckPlacement of a row more: %v, want ErrNoSpace", err)
	}
	if _, err := c.CreateLV(ctx, o); !errors.Is(err, lvm.ErrNoSpace) {
		t.Errorf("lvm2 made a row more than CapacityOf promises: %v", err)
		_ = c.RemoveLV(ctx, lvm.VMVG, "r")
	}
}
