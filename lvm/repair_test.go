package lvm

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

var dmInfoArgs = []string{"dmsetup", "info", "-c", "--noheadings", "--separator", "|", "-o", "name,uuid,suspended,tables_loaded"}

// What a raid1 volume's lvcreate -s killed 0.335 s in left (the VM, lvm2
// 2.03.16), beside a healthy device of the VG and one of another VG.
const dmLeftovers = `carve--linear-vol1|LVM-h6Tjey4MdBNvG6JAbfs3lMAR8TjI0Ta7vol1uuid|Suspended|Both
carve--linear-vol1-real|LVM-h6Tjey4MdBNvG6JAbfs3lMAR8TjI0Ta7vol1uuid-real|Active|Inactive
carve--linear-vol3|LVM-h6Tjey4MdBNvG6JAbfs3lMAR8TjI0Ta7vol3uuid|Active|Live
other-lv|LVM-ZZZZother|Suspended|Live
`

// The repair clears stale inactive tables before it resumes (lvchange
// --refresh would make them live), acts only on the VG's own devices and
// on what is still there a moment later, then refreshes the LVs lvs shows
// active but not live.
func TestRepairInterrupted(t *testing.T) {
	defer func(d time.Duration) { settleDelay = d }(settleDelay)
	settleDelay = 0
	c := newFake(t,
		step{args: dmInfoArgs, out: dmLeftovers},
		// The VG's UUID (h6Tjey-...) tells its devices from other-lv's.
		step{args: vgsArgs("carve-linear"), out: "@linear-vg"},
		lockingDirStep(t.TempDir()), // the rest under lvm2's VG lock
		step{args: dmInfoArgs, out: dmLeftovers},
		step{args: []string{"dmsetup", "clear", "carve--linear-vol1"}},
		step{args: []string{"dmsetup", "clear", "carve--linear-vol1-real"}},
		// A device was suspended: every active LV is refreshed (the
		// fixture's two; its inactive one is not).
		step{args: lvsArgs("carve-linear"), out: "@linear-lvs"},
		step{args: []string{"lvchange", "--refresh", "carve-linear/vol1"}},
		step{args: []string{"lvchange", "--refresh", "carve-linear/vol3"}},
	)
	did, err := c.RepairInterrupted(ctx, "carve-linear")
	if err != nil {
		t.Fatal(err)
	}
	if len(did) != 4 || !strings.Contains(did[2], "refreshed carve-linear/vol1") {
		t.Errorf("repairs reported: %q", did)
	}
}

// Nothing found: one dmsetup info, nothing else (no vgs). A device
// suspended only for a moment (another command's suspend and resume) is
// left alone, and so is another VG's.
func TestRepairInterruptedLeavesATransientSuspension(t *testing.T) {
	defer func(d time.Duration) { settleDelay = d }(settleDelay)
	settleDelay = 0
	healthy := "carve--linear-vol3|LVM-h6Tjey4MdBNvG6JAbfs3lMAR8TjI0Ta7vol3uuid|Active|Live\n"
	c := newFake(t,
		step{args: dmInfoArgs, out: "No devices found\n"},
		step{args: dmInfoArgs, out: healthy},
		step{args: dmInfoArgs, out: dmLeftovers},
		step{args: vgsArgs("carve-linear"), out: "@linear-vg"},
		lockingDirStep(t.TempDir()),
		step{args: dmInfoArgs, out: healthy},
		step{args: dmInfoArgs, out: "other-lv|LVM-ZZZZother|Suspended|Live\n"},
		step{args: vgsArgs("carve-linear"), out: "@linear-vg"},
	)
	for range 4 {
		if did, err := c.RepairInterrupted(ctx, "carve-linear"); err != nil || len(did) > 0 {
			t.Errorf("repairs: %q, %v; want none", did, err)
		}
	}
	if _, err := c.RepairInterrupted(ctx, "bad/vg"); err == nil {
		t.Error("an invalid VG name was taken")
	}
}

func TestParseDMInfo(t *testing.T) {
	devs, err := parseDMInfo(dmLeftovers)
	if err != nil {
		t.Fatal(err)
	}
	want := []dmDevice{
		{Name: "carve--linear-vol1", UUID: "LVM-h6Tjey4MdBNvG6JAbfs3lMAR8TjI0Ta7vol1uuid", Suspended: true, Inactive: true},
		{Name: "carve--linear-vol1-real", UUID: "LVM-h6Tjey4MdBNvG6JAbfs3lMAR8TjI0Ta7vol1uuid-real", Inactive: true},
		{Name: "carve--linear-vol3", UUID: "LVM-h6Tjey4MdBNvG6JAbfs3lMAR8TjI0Ta7vol3uuid"},
		{Name: "other-lv", UUID: "LVM-ZZZZother", Suspended: true},
	}
	if !slices.Equal(devs, want) {
		t.Errorf("parsed %+v\nwant %+v", devs, want)
	}
	for _, bad := range []string{"a|b|Active", "a|b|Frozen|Live", "a|b|Active|Some", "|b|Active|Live", "a|b|Active|Live|x"} {
		if _, err := parseDMInfo(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParseDMInfo(f *testing.F) {
	f.Add(dmLeftovers)
	f.Add("No devices found\n")
	f.Fuzz(func(t *testing.T, out string) {
		devs, err := parseDMInfo(out)
		if err != nil {
			return
		}
		for _, d := range devs {
			if d.Name == "" || strings.Contains(d.Name, "|") || strings.Contains(d.UUID, "|") {
				t.Errorf("parsed a device %+v from %q", d, out)
			}
		}
	})
}

// A changing command cut short (here an activation killed at its
// deadline) is followed by the repair, before its error is returned; a
// command of the repair cut short in turn starts none.
func TestACutCommandIsFollowedByARepair(t *testing.T) {
	defer func(d time.Duration) { settleDelay = d }(settleDelay)
	settleDelay = 0
	c := newFake(t,
		step{args: []string{"lvchange", "-ay", "-K", "carve-linear/vol1"}, stderr: "killed", cut: true},
		step{args: dmInfoArgs, out: dmLeftovers},
		step{args: vgsArgs("carve-linear"), out: "@linear-vg"},
		lockingDirStep(t.TempDir()),
		step{args: dmInfoArgs, out: dmLeftovers},
		step{args: []string{"dmsetup", "clear", "carve--linear-vol1"}},
		step{args: []string{"dmsetup", "clear", "carve--linear-vol1-real"}},
		step{args: lvsArgs("carve-linear"), out: "@linear-lvs"},
		step{args: []string{"lvchange", "--refresh", "carve-linear/vol1"}, stderr: "killed", cut: true},
	)
	err := c.Activate(ctx, "carve-linear", "vol1")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "-ay") {
		t.Errorf("error = %v, want the activation's own", err)
	}
	// A report cut short is no change: nothing follows it.
	c = newFake(t, step{args: lvsArgs("carve-linear"), stderr: "killed", cut: true})
	if _, err := c.ListLVs(ctx, "carve-linear"); err == nil {
		t.Error("a cut lvs succeeded")
	}
}
