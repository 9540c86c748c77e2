//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"carve.dev/carve/lvm"
)

// TestCutShortConversionIsConvertedAgain: an lvconvert of a live volume
// to raid1 killed while lvm2 wiped the new legs' metadata leaves those
// legs as LVs of their own, visible and unlinked, and lvm2 then refuses
// every conversion of the volume ("Logical Volume ..._rimage_1 already
// exists"): the retried ControllerModifyVolume must remove them and
// convert. The kill is lvm2's own: lvconvert runs under strace, killed at
// its k-th io_submit, for k = 1, 2, ... until a kill leaves stray legs
// (lvm2 2.03.16: the 10th, with the VG's metadata left inconsistent
// between its PVs, up to the 15th). The data written before reads back.
func TestCutShortConversionIsConvertedAgain(t *testing.T) {
	secondDisk(t, "raid1 needs two PVs")
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatalf("strace kills lvconvert mid-way here: %v", err)
	}
	e := setup(t)
	ctx := context.Background()
	v, staging, target, data := e.written("pvc-conv", 16*mib, mib)

	lv, _ := e.lv(v)
	stray := killConversion(t, e, lv.Name)
	t.Logf("lvconvert killed mid-way left stray legs %v", stray)
	if err := exec.Command("lvm", "lvconvert", "--yes", "--type", "raid1", "-m", "1", vg+"/"+lv.Name).Run(); err == nil {
		t.Fatal("lvm2 converted the LV with its stray legs there: the state is not the one the kill leaves")
	}

	must(t, e.modify(v, "1"))
	e.wantLegs(v, 1)
	all, err := e.lvm.ListAllLVs(ctx, vg)
	must(t, err)
	if s := lvm.StrayRAIDParts(all, lv.Name); len(s) > 0 {
		t.Fatalf("stray legs %v still there", s)
	}
	must(t, v.Down(ctx, target))
	must(t, v.Up(ctx, node, staging, target))
	if got := readPrefix(t, filepath.Join(target, "data"), len(data)); !bytes.Equal(got, data) {
		t.Fatal("data changed")
	}
	must(t, v.Down(ctx, target))
	must(t, v.Delete(ctx))
}

// killConversion runs lvconvert of LV name to raid1 under strace, killed
// at its k-th io_submit, for k from 1 until a kill leaves stray legs
// (lvm.StrayRAIDParts), and returns them. A kill before that changes
// nothing (lvm2 has committed nothing), so the next k runs on the same
// LV; an lvconvert that finishes, or one that leaves legs linked, ends
// the test: the state this test is about was not made.
func killConversion(t *testing.T, e *env, name string) []string {
	t.Helper()
	for k := 1; k <= 40; k++ {
		cmd := exec.Command("strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=io_submit",
			"-e", "inject=io_submit:signal=KILL:when="+strconv.Itoa(k),
			"lvm", "lvconvert", "--yes", "--type", "raid1", "-m", "1", vg+"/"+name)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("lvconvert under strace, to be killed at io_submit %d: %v, not killed:\n%s", k, err, out)
		}
		all, err := e.lvm.ListAllLVs(context.Background(), vg)
		must(t, err)
		if stray := lvm.StrayRAIDParts(all, name); len(stray) > 0 {
			return stray
		}
		if n := lvm.Mirrors(all, name); n > 0 {
			t.Fatalf("killed at io_submit %d, lvconvert left %s with %d mirrors and no stray legs", k, name, n)
		}
	}
	t.Fatal("no kill of lvconvert up to its 40th io_submit left stray legs")
	return nil
}
