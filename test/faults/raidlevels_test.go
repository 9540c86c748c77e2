//go:build vmtest

package faults

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/test/testenv"
)

// TestRaidLevelsServeWithLegsGone: each raid level a class can ask for,
// on a VG of six PVs (three slices of each scratch disk, as raid6 on 3
// data stripes needs five), serves a mounted volume's data with as many
// legs failing as the level survives: one for raid1, raid1 with
// dm-integrity, raid10 and raid5, two for raid6. Reads come from the remaining legs
// (the page cache dropped), writes go on, the volume's health says
// DEGRADED; once the disks are back a refresh takes the legs back (with
// integrity, a restage: see legsGone), the resync finishes (its time is
// logged), the volume is healthy and every byte written before and during
// the fault reads back.
func TestRaidLevelsServeWithLegsGone(t *testing.T) {
	e := setupSliced(t, 3, 0)
	for _, tc := range []struct {
		name   string
		params map[string]string
		lost   int
	}{
		{"raid1", map[string]string{"mirrors": "1"}, 1},
		{"raid1-integrity", map[string]string{"mirrors": "1", "raidIntegrity": "true"}, 1},
		{"raid10", map[string]string{"raidLevel": "raid10", "stripes": "2"}, 1},
		{"raid5", map[string]string{"raidLevel": "raid5", "stripes": "2"}, 1},
		{"raid6", map[string]string{"raidLevel": "raid6", "stripes": "3"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			e.legsGone(strings.ReplaceAll(tc.name, "-", ""), tc.params, tc.lost)
		})
	}
}

// legsGone runs TestRaidLevelsServeWithLegsGone's scenario for one level:
// volume name made with params, lost of its legs failing.
func (e *env) legsGone(name string, params map[string]string, lost int) {
	t := e.t
	ctx := context.Background()
	stuck := testenv.WatchStuck(t, "CreateVolume "+name, time.Minute)
	v := e.create(name, 32*mib, params)
	stuck()
	target := ""
	done := false
	t.Cleanup(func() {
		// A failed run's volume goes too: the next level needs its PVs.
		if !done {
			if target != "" {
				_ = v.Down(ctx, target)
			}
			_, _ = e.c.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.ID})
		}
	})
	target, data := e.upWithData(v, name)
	e.waitInSync(name, time.Now())

	var failed []*pv
	for i := range lost {
		p := e.legPV(name, i)
		p.fail()
		failed = append(failed, p)
	}
	t.Logf("failed the PVs of %d legs: %v", lost, pvNames(failed))
	dropCaches(t)
	if got, err := os.ReadFile(filepath.Join(target, "a")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read with %d legs gone: %v (data equal: %v)", lost, err, bytes.Equal(got, data))
	}
	more := randomBytes(mib)
	if err := testenv.WriteSynced(filepath.Join(target, "b"), more); err != nil {
		t.Fatalf("write with %d legs gone: %v", lost, err)
	}
	if !slices.ContainsFunc(e.loggedHealth(v.ID, "with legs gone"), func(h *csi.VolumeHealth_VolumeHealthEntry) bool {
		return h.GetStatus() == csi.VolumeHealthErrorType_DEGRADED
	}) {
		t.Errorf("a %s volume with %d failed legs is not reported DEGRADED", name, lost)
	}

	// The disks come back; a refresh (deploy/README.md's runbook) takes
	// the legs back and the kernel resyncs them.
	for _, p := range failed {
		p.heal()
	}
	healed := time.Now()
	e.lvmRun("lvchange", "--refresh", vg+"/"+name)
	if params["raidIntegrity"] == "true" {
		// A leg's dm-integrity layer that failed may stay failed through
		// a refresh (lvm2 then reports "refresh needed" for good: seen in
		// one of two runs); a fresh activation loads it anew. Unstaged and
		// staged again, as the runbook (deploy/README.md) says: the pod
		// restarted.
		e.loggedHealth(v.ID, "after the refresh")
		must(t, v.Down(ctx, target))
		target = e.up(v, name+"-again")
	}
	e.waitInSync(name, healed)
	eventually(t, "healthy after the legs are back (left: see the log)", func() bool {
		return len(e.loggedHealth(v.ID, "after the legs are back")) == 0
	})
	dropCaches(t)
	for file, want := range map[string][]byte{"a": data, "b": more} {
		if got, err := os.ReadFile(filepath.Join(target, file)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after recovery: %v (equal: %v)", file, err, bytes.Equal(got, want))
		}
	}
	must(t, v.Down(ctx, target))
	_, err := e.c.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.ID})
	must(t, err)
	done = true
}

// loggedHealth is the volume's health, each entry logged as seen when.
func (e *env) loggedHealth(id, when string) []*csi.VolumeHealth_VolumeHealthEntry {
	e.t.Helper()
	hs := e.volumeHealth(id)
	for _, h := range hs {
		e.t.Logf("health %s: %v %s: %s", when, h.GetStatus(), h.GetReason(), h.GetMessage())
	}
	return hs
}

// waitInSync waits for raid LV name's legs to be in sync and logs how
// long that took since start.
func (e *env) waitInSync(name string, start time.Time) {
	e.t.Helper()
	eventually(e.t, name+" in sync", func() bool {
		lv, err := e.lvm.GetLV(context.Background(), vg, name)
		return err == nil && lv.SyncPercent >= 100
	})
	e.t.Logf("%s in sync %s after %s", name, time.Since(start).Round(100*time.Millisecond), start.Format("15:04:05"))
}
