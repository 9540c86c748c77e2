package lvmvol

import (
	"fmt"
	"strings"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// healthOf reads the LV attributes that mean trouble. An empty list means
// none is known.
func healthOf(lv lvm.LV) []volume.Problem {
	var out []volume.Problem
	raid := strings.HasPrefix(lv.Layout, "raid")
	switch {
	case lv.Partial && raid:
		// A raid LV with a leg's PV gone still serves every block from
		// its other legs (lvm2 activates it degraded): found on real
		// disks by test/faults, where it was reported inaccessible.
		out = append(out, volume.Problem{Kind: volume.Degraded, Reason: "MissingRAIDLeg",
			Message: "a raid leg's physical volume is missing: the volume serves from its other legs, without redundancy"})
	case lv.Partial:
		out = append(out, volume.Problem{Kind: volume.Inaccessible, Reason: "MissingPhysicalVolume",
			Message: "logical volume is partial: a physical volume it uses is missing"})
	}
	if lv.SnapshotInvalid {
		out = append(out, volume.Problem{Kind: volume.DataLoss, Reason: "SnapshotInvalid",
			Message: "snapshot is invalid: its copy-on-write space overflowed"})
	}
	switch lv.Health {
	case "", "partial":
	case "refresh needed":
		// A raid leg failed in the kernel (its device gave IO errors) and
		// the table was not reloaded since: test/faults shows what clears
		// it (deploy/README.md, When a disk fails).
		out = append(out, volume.Problem{Kind: volume.Degraded, Reason: "RAIDRefreshNeeded",
			Message: "a raid leg failed and serves no IO: once its disk is back, run lvchange --refresh on the volume's LV; " +
				"if lvm2 still reports \"refresh needed\" (a failed dm-integrity layer), restart the pod to activate the volume anew"})
	default:
		out = append(out, volume.Problem{Kind: volume.Degraded, Reason: "LVMHealth",
			Message: fmt.Sprintf("lvm reports health %q", lv.Health)})
	}
	if raid && lv.Active && lv.SyncPercent < 100 {
		out = append(out, volume.Problem{Kind: volume.Degraded, Reason: "RAIDSyncing",
			Message: fmt.Sprintf("raid legs are %.1f%% in sync: no redundancy until they are", lv.SyncPercent)})
	}
	return out
}

// poolThresholds: a pool this full stops thin volumes (100) or soon will.
const poolNearlyFull = 90.0

// poolHealth is what a thin pool's fill means for its thin volumes: at 100%
// data or metadata, writes fail or the pool goes read-only.
func poolHealth(pool lvm.LV) []volume.Problem {
	var out []volume.Problem
	for _, u := range []struct {
		what    string
		percent float64
	}{{"data", pool.DataPercent}, {"metadata", pool.MetadataPercent}} {
		switch {
		case u.percent >= 100:
			out = append(out, volume.Problem{Kind: volume.Inaccessible, Reason: "ThinPoolFull",
				Message: fmt.Sprintf("thin pool %s/%s is out of %s space: writes to new blocks fail", pool.VGName, pool.Name, u.what)})
		case u.percent >= poolNearlyFull:
			out = append(out, volume.Problem{Kind: volume.Degraded, Reason: "ThinPoolNearlyFull",
				Message: fmt.Sprintf("thin pool %s/%s %s is %.1f%% full", pool.VGName, pool.Name, u.what, u.percent)})
		}
	}
	return out
}

func (m *Manager) volumeOf(lv lvm.LV) volume.Volume {
	return volume.Volume{
		ID:          volume.ID{Node: m.node, VG: lv.VGName, LV: lv.Name},
		Name:        tagValue(lv, tagNamePrefix),
		SizeBytes:   int64(lv.Size),
		Published:   isPublished(lv),
		DevicePath:  devicePath(lv.VGName, lv.Name),
		KernelMajor: lv.KernelMajor,
		KernelMinor: lv.KernelMinor,
		Health:      healthOf(lv),
		Source:      m.contentSourceOf(lv),
		Encrypted:   lv.HasTag(tagEncrypted),
		Limits:      limitsOf(lv),
	}
}

// devicePath is where an active LV's device node is (volume.DevicePath).
func devicePath(vg, lv string) string { return volume.DevicePath(volume.ID{VG: vg, LV: lv}) }

// isManaged tells an LV Carve made for a volume (its tag), in whatever
// state: being created, settled, or being deleted.
func isManaged(lv lvm.LV) bool { return lv.HasTag(TagVolume) }

// isSettled tells a Carve volume in a settled state: not half created, not
// being deleted.
func isSettled(lv lvm.LV) bool {
	return isManaged(lv) && !lv.HasTag(tagPending) && !lv.HasTag(tagDeleting)
}
