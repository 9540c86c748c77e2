package lvmvol

import (
	"fmt"
	"strings"

	"carve.dev/carve/lvm"
)

// Volume is what callers learn of a Carve LV.
type Volume struct {
	ID        ID
	Name      string // CSI name, when recorded in a tag
	SizeBytes int64
	// Published is true while the LV is active: in Carve, active means
	// published (see doc.go).
	Published  bool
	DevicePath string
	// KernelMajor and KernelMinor are the device number lvm reports for
	// the LV, -1 while it is not active: the node checks that the device
	// node it is about to format or mount has this number.
	KernelMajor, KernelMinor int
	Health                   []Problem
	// Source is where the volume's data came from, nil for a blank one.
	Source *ContentSource
}

// Problem is one adverse health condition of a volume, as LVM reports it.
type Problem struct {
	Kind    ProblemKind
	Reason  string // CamelCase, for machines and short displays
	Message string
}

// ProblemKind follows CSI's VolumeHealthErrorType.
type ProblemKind int

const (
	// Degraded: usable, not operating optimally.
	Degraded ProblemKind = iota + 1
	// Inaccessible: the volume cannot be used.
	Inaccessible
	// DataLoss: data is known or suspected lost.
	DataLoss
)

var problemNames = map[ProblemKind]string{Degraded: "Degraded", Inaccessible: "Inaccessible", DataLoss: "DataLoss"}

// String is the kind's name, as resources record it.
func (k ProblemKind) String() string { return problemNames[k] }

// ParseProblemKind reads a name String gave; unknown names are 0.
func ParseProblemKind(name string) ProblemKind {
	for k, n := range problemNames {
		if n == name {
			return k
		}
	}
	return 0
}

// healthOf reads the LV attributes that mean trouble. An empty list means
// none is known.
func healthOf(lv lvm.LV) []Problem {
	var out []Problem
	if lv.Partial {
		out = append(out, Problem{Inaccessible, "MissingPhysicalVolume",
			"logical volume is partial: a physical volume it uses is missing"})
	}
	if lv.SnapshotInvalid {
		out = append(out, Problem{DataLoss, "SnapshotInvalid",
			"snapshot is invalid: its copy-on-write space overflowed"})
	}
	if lv.Health != "" && lv.Health != "partial" {
		out = append(out, Problem{Degraded, "LVMHealth",
			fmt.Sprintf("lvm reports health %q", lv.Health)})
	}
	if strings.HasPrefix(lv.Layout, "raid") && lv.Active && lv.SyncPercent < 100 {
		out = append(out, Problem{Degraded, "RAIDSyncing",
			fmt.Sprintf("raid legs are %.1f%% in sync: no redundancy until they are", lv.SyncPercent)})
	}
	return out
}

// poolThresholds: a pool this full stops thin volumes (100) or soon will.
const poolNearlyFull = 90.0

// poolHealth is what a thin pool's fill means for its thin volumes: at 100%
// data or metadata, writes fail or the pool goes read-only.
func poolHealth(pool lvm.LV) []Problem {
	var out []Problem
	for _, u := range []struct {
		what    string
		percent float64
	}{{"data", pool.DataPercent}, {"metadata", pool.MetadataPercent}} {
		switch {
		case u.percent >= 100:
			out = append(out, Problem{Inaccessible, "ThinPoolFull",
				fmt.Sprintf("thin pool %s/%s is out of %s space: writes to new blocks fail", pool.VGName, pool.Name, u.what)})
		case u.percent >= poolNearlyFull:
			out = append(out, Problem{Degraded, "ThinPoolNearlyFull",
				fmt.Sprintf("thin pool %s/%s %s is %.1f%% full", pool.VGName, pool.Name, u.what, u.percent)})
		}
	}
	return out
}

func (m *Manager) volumeOf(lv lvm.LV) Volume {
	return Volume{
		ID:          ID{Node: m.node, VG: lv.VGName, LV: lv.Name},
		Name:        tagValue(lv, tagNamePrefix),
		SizeBytes:   int64(lv.Size),
		Published:   isPublished(lv),
		DevicePath:  devicePath(lv.VGName, lv.Name),
		KernelMajor: lv.KernelMajor,
		KernelMinor: lv.KernelMinor,
		Health:      healthOf(lv),
		Source:      m.contentSourceOf(lv),
	}
}

// devicePath is where an active LV's device node is: lvm creates /dev/vg/lv
// itself when udev is not there to do it, so this path holds either way.
func devicePath(vg, lv string) string { return "/dev/" + vg + "/" + lv }

// DevicePath is where the device of a published volume appears on its node.
func DevicePath(id ID) string { return devicePath(id.VG, id.LV) }

// isManaged tells a Carve volume in a settled state (not half created, not
// being deleted).
func isManaged(lv lvm.LV) bool { return lv.HasTag(TagVolume) }

func isSettled(lv lvm.LV) bool {
	return isManaged(lv) && !lv.HasTag(tagPending) && !lv.HasTag(tagDeleting)
}
