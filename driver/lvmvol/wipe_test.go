package lvmvol_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
	"carve.dev/carve/test/loopdev"
	"carve.dev/carve/test/lvmfake"
)

// slowTool puts an executable named name first in PATH for this test: it
// appends its arguments to the returned log file, sleeps for delay, and
// exits 0. It stands for a data command on a slow device.
func slowTool(t *testing.T, name string, delay time.Duration) (log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, name+".args")
	script := fmt.Sprintf("#!/bin/sh\necho \"$@\" >>%s\nsleep %g\n", log, delay.Seconds())
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	if p, err := exec.LookPath(name); err != nil || p != filepath.Join(dir, name) {
		t.Fatalf("fake %s not first in PATH: %q, %v", name, p, err)
	}
	return log
}

// The wipe is data work: a zeroing slower than the per-command timeout
// (--command-timeout, meant for lvm's metadata commands) must still finish,
// or a large volume on a slow device could never be deleted.
func TestWipeOutlivesCommandTimeout(t *testing.T) {
	const cmdTimeout = 200 * time.Millisecond
	log := slowTool(t, "blkdiscard", 1*time.Second)
	f := lvmfake.New(100*mib, vg)
	m := lvmvol.NewManager(lvmvol.Config{LVM: f, Wiper: lvmvol.ZeroWiper{Run: runner.New(cmdTimeout)}, Node: node, VolumeGroups: []string{vg}})
	vol, err := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := m.DeleteVolume(ctx, vol.ID); err != nil {
		t.Fatalf("delete with a wipe slower than the command timeout: %v", err)
	}
	if took := time.Since(start); took < cmdTimeout {
		t.Fatalf("delete took %v, less than the %v command timeout: the test proves nothing", took, cmdTimeout)
	}
	if _, ok := f.LV(vg, "pvc-1"); ok {
		t.Error("LV still there after delete")
	}
	args, err := os.ReadFile(log)
	if err != nil || !strings.Contains(string(args), "--zeroout") || !strings.Contains(string(args), "/dev/vg0/pvc-1") {
		t.Errorf("blkdiscard ran with %q (%v), want a zeroing of /dev/vg0/pvc-1", args, err)
	}
}

// A wipe cut short resumes where its last record says: chunks before it
// are not zeroed again, none after it is skipped, and each record was
// written after a flush.
func TestWipeResumesFromRecordedProgress(t *testing.T) {
	m, f := newManager(t)
	m.SetDataWorkSteps(4*mib, 0) // 16 MiB: four chunks, a record after each
	vol, err := m.CreateVolume(ctx, req("pvc-1", 16*mib))
	if err != nil {
		t.Fatal(err)
	}
	f.Calls = nil
	zeroes := 0
	f.Fail = func(call string) error {
		if call == "Wipe" {
			if zeroes++; zeroes == 3 {
				return errors.New("killed")
			}
		}
		return nil
	}
	if err := m.DeleteVolume(ctx, vol.ID); err == nil {
		t.Fatal("delete succeeded through a failed chunk")
	}
	lv, _ := f.LV(vg, "pvc-1")
	if got := wipedTags(lv); !slices.Equal(got, []string{"carve.dev/wiped=8388608"}) {
		t.Fatalf("progress records %v after two chunks, want the one of 8 MiB", got)
	}
	want := []string{"Wipe", "Flush", "AddTags", "Wipe", "Flush", "AddTags", "RemoveTags", "Wipe"}
	if got := f.Calls[2 : 2+len(want)]; !slices.Equal(got, want) {
		t.Errorf("calls %v, want %v: every record after a flush", got, want)
	}

	f.Fail, f.Zeroed = nil, nil
	if err := m.DeleteVolume(ctx, vol.ID); err != nil {
		t.Fatalf("retry: %v", err)
	}
	wantZeroed := []lvmfake.Range{{Device: "/dev/vg0/pvc-1", Offset: 8 * mib, Length: 4 * mib}, {Device: "/dev/vg0/pvc-1", Offset: 12 * mib, Length: 4 * mib}}
	if !slices.Equal(f.Zeroed, wantZeroed) {
		t.Errorf("retry zeroed %v, want the last two chunks", f.Zeroed)
	}
	if _, ok := f.LV(vg, "pvc-1"); ok {
		t.Error("LV still there")
	}
}

// Records that do not parse, are out of range or unaligned count for
// nothing: the wipe starts at 0. Several records (a crash between adding
// one and dropping the older) resume from the furthest.
func TestWipeProgressRecordsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		tags []string
		from int64
	}{
		{[]string{"carve.dev/wiped=x"}, 0},
		{[]string{"carve.dev/wiped=-4194304"}, 0},
		{[]string{"carve.dev/wiped=33554432"}, 0}, // beyond the LV
		{[]string{"carve.dev/wiped=1000"}, 0},     // not whole sectors
		{[]string{"carve.dev/wiped=4194304", "carve.dev/wiped=12582912"}, 12 * mib},
	} {
		m, f := newManager(t)
		m.SetDataWorkSteps(4*mib, time.Hour)
		f.Put(lvm.LV{Name: "pvc-1", VGName: vg, Size: 16 * mib,
			Tags: append([]string{lvmvol.TagVolume, "carve.dev/deleting"}, tc.tags...)})
		if err := m.DeleteVolume(ctx, volume.ID{Node: node, VG: vg, LV: "pvc-1"}); err != nil {
			t.Fatal(err)
		}
		if len(f.Zeroed) == 0 || f.Zeroed[0].Offset != tc.from || slices.Contains(f.Calls, "AddTags") {
			t.Errorf("records %v: zeroed %v, calls %v; want a start at %d and no record within the hour", tc.tags, f.Zeroed, f.Calls, tc.from)
		}
	}
}

// A record is written only after a flush: when the flush fails, the wipe
// fails and records nothing.
func TestWipeRecordsNothingUnflushed(t *testing.T) {
	m, f := newManager(t)
	m.SetDataWorkSteps(4*mib, 0)
	vol, _ := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	f.Fail = func(call string) error {
		if call == "Flush" {
			return errors.New("I/O error")
		}
		return nil
	}
	if err := m.DeleteVolume(ctx, vol.ID); err == nil {
		t.Fatal("delete succeeded through a failed flush")
	}
	if lv, _ := f.LV(vg, "pvc-1"); len(wipedTags(lv)) != 0 {
		t.Errorf("progress recorded without a flush: %v", lv.Tags)
	}
}

func wipedTags(lv lvm.LV) []string {
	var out []string
	for _, t := range lv.Tags {
		if strings.HasPrefix(t, "carve.dev/wiped=") {
			out = append(out, t)
		}
	}
	return out
}

// ZeroWiper on a real loop device: exactly the asked range reads zeroes
// afterwards, and Flush works on a block device.
func TestZeroWiperZeroesARange(t *testing.T) {
	dev := loopDevice(t, 8*mib)
	pattern := bytes.Repeat([]byte{0xA5}, 8*mib)
	if err := os.WriteFile(dev, pattern, 0); err != nil {
		t.Fatal(err)
	}
	w := lvmvol.ZeroWiper{Run: runner.New(time.Minute)}
	if err := w.Zero(ctx, dev, 1*mib, 2*mib); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx, dev); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dev)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(pattern[:1*mib], make([]byte, 2*mib), pattern[3*mib:])
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("device differs from the expected image at byte %d", i)
	}
}

// loopDevice attaches a sparse file of size bytes to a loop device for this
// test (loopdev.New), or skips without blkdiscard.
func loopDevice(t *testing.T, size int64) string {
	t.Helper()
	if _, err := exec.LookPath("blkdiscard"); err != nil {
		t.Skip("skipping: blkdiscard not installed")
	}
	dev, _ := loopdev.New(t, size)
	return dev
}

// A report that says active is not trusted for the wipe: it may predate
// the end of a copy or create that deactivated the LV (both run beside a
// delete), so the wipe activates it, unless the delete itself just did.
func TestWipeActivatesWhatItDidNotActivateItself(t *testing.T) {
	m, f := newManager(t)
	f.Put(lvm.LV{Name: "pvc-1", VGName: vg, Size: 8 * mib, Active: true,
		Tags: []string{lvmvol.TagVolume, "carve.dev/deleting", "carve.dev/params=p1"}})
	if err := m.DeleteVolume(ctx, volume.ID{Node: node, VG: vg, LV: "pvc-1"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"GetLV", "Activate", "Wipe", "RemoveLVOf"}; !slices.Equal(f.Calls, want) {
		t.Errorf("calls %v, want %v", f.Calls, want)
	}
}
