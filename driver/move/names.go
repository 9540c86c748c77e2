package move

import (
	"regexp"
	"strconv"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// What a move makes is named after its UID: a restarted controller, or
// the undo of a move whose status never said what it had made, finds it
// by name. The UID also keeps apart two moves of one name made one
// after the other.

// targetName is the CSI name of the target volume, and of the new
// PersistentVolume.
func targetName(m *v1alpha1.VolumeMove) string { return "move-" + string(m.UID) }

// targetResource names the target's LogicalVolume.
func targetResource(m *v1alpha1.VolumeMove) string { return volume.LVName(targetName(m)) }

// firstSnapshotName and secondSnapshotName are the CSI names of S1 and S2.
func firstSnapshotName(m *v1alpha1.VolumeMove) string  { return targetName(m) + "-s1" }
func secondSnapshotName(m *v1alpha1.VolumeMove) string { return targetName(m) + "-s2" }

// snapshotResource names a snapshot's LogicalVolumeSnapshot; its ID is
// node/vg/that name, vg the source's (snapshotID).
func snapshotResource(name string) string { return volume.SnapshotLVName(name) }

// snapshotID is the ID the source's agent gives the snapshot name of
// source: known before it is taken, so that the status records it first.
func snapshotID(source volume.ID, name string) volume.ID {
	return volume.ID{Node: source.Node, VG: source.VG, LV: snapshotResource(name)}
}

// key is the move as the hold and the snapshots' annotation name it.
func key(m *v1alpha1.VolumeMove) string { return m.Namespace + "/" + m.Name }

// percentDone reads how far the agent's copy has got from its Ready
// condition's message ("copy of vg/lv runs in the background: 40% done").
var percentDone = regexp.MustCompile(`(\d+)% done`)

func copiedPercent(lv *v1alpha1.LogicalVolume) (int32, bool) {
	c := lv.Ready()
	if c == nil || c.ObservedGeneration != lv.Generation {
		return 0, false
	}
	got := percentDone.FindStringSubmatch(c.Message)
	if got == nil {
		return 0, false
	}
	n, err := strconv.Atoi(got[1])
	if err != nil || n < 0 || n > 100 {
		return 0, false
	}
	return int32(n), true
}
