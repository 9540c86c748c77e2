package lvmvol

import (
	"context"
	"errors"
	"fmt"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// Space reads every served VG. It is a query (lvm.Cached; see query.go).
// A VG that cannot be read at all (lvm2 finds none of its disks) is
// reported with no space and its VolumeGroupUnreadable problem, so that
// the other VGs are still reported and the controller sees no capacity
// there. Any other failure (a timeout, a cancelled context) tells nothing
// of the VG: it fails the whole reading, and the caller keeps its last
// one.
func (m *Manager) Space(ctx context.Context) ([]volume.VGSpace, error) {
	r := lvm.Cached // a query
	out := make([]volume.VGSpace, 0, len(m.vgs))
	for _, vg := range m.vgs {
		s, err := m.vgSpace(ctx, r, vg)
		if errors.Is(err, volume.ErrVGUnreadable) {
			s = volume.VGSpace{Name: vg, Health: []volume.Problem{vgUnreadable(err.Error())}}
		} else if err != nil {
			return nil, fmt.Errorf("space of %s: %w", vg, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// vgSpace reads one VG, its allocatable PVs and its thin pools, and its
// health as its report tells it.
func (m *Manager) vgSpace(ctx context.Context, r lvm.Reads, name string) (volume.VGSpace, error) {
	vg, err := m.readVG(ctx, r, name)
	if err != nil {
		return volume.VGSpace{}, err
	}
	s := volume.VGSpace{Name: name, Size: vg.Size, Free: vg.Free, ExtentSize: vg.ExtentSize,
		MetadataSize: vg.MetadataSize, MetadataFree: vg.MetadataFree, Health: vgHealth(name, vg), Tags: vg.Tags}
	pvs, err := m.lvm.ListVGPVs(ctx, r, name)
	if err != nil {
		return volume.VGSpace{}, err
	}
	for _, pv := range pvs {
		if pv.Allocatable() {
			s.PVFree = append(s.PVFree, pv.Free)
		}
	}
	lvs, err := m.lvm.ListLVs(ctx, r, name)
	if err != nil {
		return volume.VGSpace{}, err
	}
	for _, lv := range lvs {
		if lv.IsThinPool() {
			s.Pools = append(s.Pools, volume.PoolSpace{Name: lv.Name, Size: lv.Size, Free: lv.ThinPoolFree(),
				DataPercent: lv.DataPercent, MetadataPercent: lv.MetadataPercent})
		}
	}
	return s, nil
}

// vgHealth is what a VG's report says of its PVs: one missing (counted, or
// the VG partial) degrades it, and Carve changes none of its LVs then
// (changeableVG).
func vgHealth(name string, vg lvm.VG) []volume.Problem {
	if vg.MissingPVCount == 0 && !vg.Partial {
		return nil
	}
	return []volume.Problem{{Kind: volume.Degraded, Reason: "MissingPhysicalVolume",
		Message: fmt.Sprintf("volume group %s misses %d physical volume(s)", name, vg.MissingPVCount)}}
}

// vgUnreadable is the problem of a VG lvm2 cannot read.
func vgUnreadable(message string) volume.Problem {
	return volume.Problem{Kind: volume.Inaccessible, Reason: "VolumeGroupUnreadable", Message: message}
}
