package lvmvol

import (
	"context"
	"fmt"

	"carve.dev/carve/driver/volume"
)

// Space reads every served VG. It is a query: see query.
func (m *Manager) Space(ctx context.Context) ([]volume.VGSpace, error) {
	ctx = query(ctx)
	out := make([]volume.VGSpace, 0, len(m.vgs))
	for _, vg := range m.vgs {
		s, err := m.vgSpace(ctx, vg)
		if err != nil {
			return nil, fmt.Errorf("space of %s: %w", vg, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// vgSpace reads one VG, its allocatable PVs and its thin pools.
func (m *Manager) vgSpace(ctx context.Context, name string) (volume.VGSpace, error) {
	vg, err := m.readVG(ctx, name)
	if err != nil {
		return volume.VGSpace{}, err
	}
	s := volume.VGSpace{Name: name, Size: vg.Size, Free: vg.Free, ExtentSize: vg.ExtentSize,
		MetadataSize: vg.MetadataSize, MetadataFree: vg.MetadataFree}
	pvs, err := m.lvm.ListVGPVs(ctx, name)
	if err != nil {
		return volume.VGSpace{}, err
	}
	for _, pv := range pvs {
		if pv.Allocatable() {
			s.PVFree = append(s.PVFree, pv.Free)
		}
	}
	lvs, err := m.lvm.ListLVs(ctx, name)
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
