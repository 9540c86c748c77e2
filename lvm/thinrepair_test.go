package lvm

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// thinCreateArgs is the lvcreate of TestCreateLVInactiveWithoutReadBack.
var thinCreateArgs = []string{"lvcreate", "-n", "thin9", "-V", "8388608b", "--thinpool", "pool0", "--yes", "-an", "carve-thin"}

var thinCreate = CreateLVOptions{VG: "carve-thin", Name: "thin9", Size: 5 * mib, ThinPool: "pool0",
	ExtentSize: 4 * mib, Inactive: true, SkipReadBack: true}

var lockingDirArgs = []string{"lvmconfig", "--typeconfig", "full", "global/locking_dir"}

// thinSteps are the commands of one look at pool0 of carve-thin: its
// report (metadata transaction id 3, thin1 holding device 1, thin7 of
// another pool device 2) and the kernel's status with transaction id
// kernel.
func thinSteps(kernel int) []step {
	rows := `{"report":[{"lv":[
	  {"lv_name":"pool0","pool_lv":"","thin_id":"","transaction_id":"3","lv_dm_path":"/dev/mapper/carve--thin-pool0"},
	  {"lv_name":"thin1","pool_lv":"pool0","thin_id":"1","transaction_id":"","lv_dm_path":"/dev/mapper/carve--thin-thin1"},
	  {"lv_name":"pool1","pool_lv":"","thin_id":"","transaction_id":"1","lv_dm_path":"/dev/mapper/carve--thin-pool1"},
	  {"lv_name":"thin7","pool_lv":"pool1","thin_id":"2","transaction_id":"","lv_dm_path":"/dev/mapper/carve--thin-thin7"}]}]}`
	return []step{
		{args: append(append([]string{"lvs", "--readonly"}, reportArgs(thinFields)...), "carve-thin"), out: rows},
		{args: []string{"dmsetup", "status", "carve--thin-pool0-tpool"},
			out: "0 524288 thin-pool " + strconv.Itoa(kernel) + " 11/4096 0/4096 - rw discard_passdown queue_if_no_space - 1024\n"},
	}
}

func lockingDirStep(dir string) step {
	return step{args: lockingDirArgs, out: `locking_dir="` + dir + `"` + "\n"}
}

func poolMessage(msg string) []string {
	return []string{"dmsetup", "message", "carve--thin-pool0-tpool", "0", msg}
}

func stepsOf(parts ...any) []step {
	var steps []step
	for _, p := range parts {
		switch p := p.(type) {
		case step:
			steps = append(steps, p)
		case []step:
			steps = append(steps, p...)
		}
	}
	return steps
}

// The first thin command in a pool since the start deletes the device
// lvm2 would create next if the kernel has it (a cut create_thin left it,
// and lvm2's create_thin would take it, data and all). The next command
// runs alone; after one is cut, the check runs again (here the kernel has
// no such device: ENODATA).
func TestThinCommandChecksThePoolFirst(t *testing.T) {
	dir := t.TempDir()
	c := newUncheckedFake(t, stepsOf(lockingDirStep(dir), thinSteps(3),
		step{args: poolMessage("delete 2")}, step{args: thinCreateArgs},
		step{args: thinCreateArgs},
		step{args: thinCreateArgs, stderr: "killed", cut: true},
		step{args: dmInfoArgs, out: "No devices found\n"}, // the repair after the cut
		thinSteps(3), step{args: poolMessage("delete 2"), stderr: "device-mapper: message ioctl on carve--thin-pool0-tpool  failed: No data available\n"},
		step{args: thinCreateArgs})...)
	for i, want := range []bool{true, true, false, true} {
		if _, err := c.CreateLV(ctx, thinCreate); (err == nil) != want {
			t.Errorf("create %d: error = %v", i, err)
		}
	}
}

// A failure naming a device id (a cut command that was not Carve's left
// it): the device is deleted under lvm2's VG lock and the lvcreate runs
// again.
func TestThinCreateDeletesADeviceNoLVHas(t *testing.T) {
	c := newFake(t, stepsOf(step{args: thinCreateArgs, stderr: "@err-thin-taken"}, lockingDirStep(t.TempDir()), thinSteps(3),
		step{args: poolMessage("delete 2")}, step{args: thinCreateArgs})...)
	if _, err := c.CreateLV(ctx, thinCreate); err != nil {
		t.Fatal(err)
	}
}

// Killed after set_transaction_id too: the kernel's id (4) is one ahead of
// the metadata's (3). It is put back and the device the cut command made
// (the next id) deleted, for a thin snapshot.
func TestThinSnapshotPutsTheTransactionIDBack(t *testing.T) {
	snap := []string{"lvcreate", "-s", "-n", "snap1", "-kn", "-an", "--yes", "carve-thin/thin1"}
	c := newFake(t, stepsOf(step{args: snap, stderr: "@err-thin-ahead"}, lockingDirStep(t.TempDir()), thinSteps(4),
		step{args: poolMessage("set_transaction_id 4 3")}, step{args: poolMessage("delete 2")},
		step{args: snap})...)
	origin := LV{Name: "thin1", VGName: "carve-thin", Attr: "Vwi-a-tz--", PoolLV: "pool0", Size: 8 * mib, ExtentSize: 4 * mib}
	if _, err := c.CreateSnapshotOf(ctx, origin, "snap1", SnapshotOptions{Inactive: true, SkipReadBack: true}); err != nil {
		t.Fatal(err)
	}
}

// A device id some LV of the pool holds is never deleted, and a metadata
// ahead of the kernel (lvm2's own queued messages) is left to lvm2: the
// lvcreate's error stands, with why nothing was repaired.
func TestThinRepairLeavesWhatIsAnLVs(t *testing.T) {
	owned := strings.ReplaceAll(readAt(t, "@err-thin-taken", ".stderr"), "device_id 2", "device_id 1")
	c := newFake(t, stepsOf(step{args: thinCreateArgs, stderr: owned}, lockingDirStep(t.TempDir()), thinSteps(3))...)
	_, err := c.CreateLV(ctx, thinCreate)
	if err == nil || !strings.Contains(err.Error(), "device id 1 of the pool is LV thin1's: not deleted") {
		t.Errorf("error = %v, want the lvcreate's, saying device 1 is thin1's", err)
	}

	// Metadata 3, kernel 2: three attempts, no message sent.
	steps := []step{{args: thinCreateArgs, stderr: "@err-thin-taken"}, lockingDirStep(t.TempDir())}
	steps = append(steps, thinSteps(2)...)
	for range thinAttempts - 1 {
		steps = append(steps, step{args: thinCreateArgs, stderr: "@err-thin-taken"})
		steps = append(steps, thinSteps(2)...)
	}
	c = newFake(t, steps...)
	if _, err := c.CreateLV(ctx, thinCreate); err == nil || !strings.Contains(err.Error(), "already contain thin device") {
		t.Errorf("error = %v, want lvm2's", err)
	}
}

// While an lvm2 command holds the VG's lock, nothing of the pool is read
// or changed; the repair gives up when its context ends.
func TestThinRepairWaitsForLVM2sLock(t *testing.T) {
	dir := t.TempDir()
	f, err := os.OpenFile(filepath.Join(dir, "V_carve-thin"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	c := newFake(t, step{args: thinCreateArgs, stderr: "@err-thin-taken"}, lockingDirStep(dir))
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c.CreateLV(short, thinCreate)
	if err == nil || !strings.Contains(err.Error(), "held by an lvm2 command") {
		t.Errorf("error = %v, want the lock's", err)
	}
}

// lvm2's locking dir may not exist yet (a fresh /run): it is made, as
// lvm2 makes it.
func TestLockVGMakesTheLockingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "lock", "lvm")
	c := newFake(t, lockingDirStep(dir))
	unlock, err := c.lockVGShared(ctx, "carve-thin")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if _, err := os.Stat(filepath.Join(dir, "V_carve-thin")); err != nil {
		t.Error(err)
	}
}

func TestParseThinPoolStatus(t *testing.T) {
	id, err := parseThinPoolStatus("0 524288 thin-pool 12 11/4096 0/4096 - rw discard_passdown queue_if_no_space - 1024\n")
	if err != nil || id != 12 {
		t.Errorf("= %d, %v; want 12", id, err)
	}
	for _, bad := range []string{"", "0 524288 thin-pool Fail", "0 524288 linear", "0 1 thin-pool 1 x\n0 1 thin-pool 2 x",
		"0 1 thin-pool -1 1/2"} {
		if _, err := parseThinPoolStatus(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseLockingDir(t *testing.T) {
	if d, err := parseLockingDir("locking_dir=\"/run/lock/lvm\"\n"); err != nil || d != "/run/lock/lvm" {
		t.Errorf("= %q, %v", d, err)
	}
	for _, bad := range []string{"", `locking_dir="lock"`, `locking_dir="/run/../x"`, `locking_dir=/run/lock/lvm`, `x="/run"`} {
		if _, err := parseLockingDir(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The two command outputs the thin repair reads besides lvs: a thin
// pool's status line and lvm2's locking dir. A dir taken is absolute and
// clean (it is joined with the VG's name and opened).
func FuzzParseThinPoolStatus(f *testing.F) {
	f.Add("0 524288 thin-pool 1 11/4096 0/4096 - rw discard_passdown queue_if_no_space - 1024\n", "locking_dir=\"/run/lock/lvm\"\n")
	f.Add("0 524288 thin-pool Fail\n", `locking_dir="/x/../y"`)
	f.Fuzz(func(t *testing.T, status, lockcfg string) {
		if id, err := parseThinPoolStatus(status); err == nil && !strings.Contains(status, strconv.FormatUint(id, 10)) {
			t.Errorf("transaction id %d read from %q", id, status)
		}
		if dir, err := parseLockingDir(lockcfg); err == nil && (!filepath.IsAbs(dir) || filepath.Clean(dir) != dir) {
			t.Errorf("locking dir %q read from %q", dir, lockcfg)
		}
	})
}

// The lvremove of a thin LV is checked too (skipping its delete in a pool
// left ahead would leave the LV's data under the next id), and an
// inactive pool (no thin-pool device in the kernel) is activated to be
// checked.
func TestThinRemoveChecksAnInactivePool(t *testing.T) {
	noDevice := "Device does not exist.\nCommand failed.\n"
	c := newUncheckedFake(t, stepsOf(lockingDirStep(t.TempDir()), thinSteps(3)[0],
		step{args: []string{"dmsetup", "status", "carve--thin-pool0-tpool"}, stderr: noDevice},
		step{args: []string{"dmsetup", "status", "carve--thin-pool0"}, stderr: noDevice},
		step{args: []string{"lvchange", "-ay", "-K", "carve-thin/pool0"}},
		thinSteps(4), step{args: poolMessage("set_transaction_id 4 3")}, step{args: poolMessage("delete 2")},
		step{args: []string{"lvremove", "--yes", "carve-thin/thin1"}})...)
	thin := LV{Name: "thin1", VGName: "carve-thin", Attr: "Vwi-a-tz--", PoolLV: "pool0"}
	if err := c.RemoveLVOf(ctx, thin); err != nil {
		t.Fatal(err)
	}
}
