package lvmvol

import (
	"context"
	"fmt"
)

// VGSpace is a volume group's space as the capacity rules need it; the
// node agent publishes it in its NodeStorage resource.
type VGSpace struct {
	Name                   string
	Size, Free, ExtentSize uint64
	// PVFree is each allocatable PV's free space.
	PVFree []uint64
	Pools  []PoolSpace
}

// PoolSpace is a thin pool's data space.
type PoolSpace struct {
	Name                         string
	Size, Free                   uint64
	DataPercent, MetadataPercent float64
}

// Space reads every served VG.
func (m *Manager) Space(ctx context.Context) ([]VGSpace, error) {
	out := make([]VGSpace, 0, len(m.vgs))
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
func (m *Manager) vgSpace(ctx context.Context, name string) (VGSpace, error) {
	vg, err := m.lvm.GetVG(ctx, name)
	if err != nil {
		return VGSpace{}, err
	}
	s := VGSpace{Name: name, Size: vg.Size, Free: vg.Free, ExtentSize: vg.ExtentSize}
	pvs, err := m.lvm.ListVGPVs(ctx, name)
	if err != nil {
		return VGSpace{}, err
	}
	for _, pv := range pvs {
		if pv.Allocatable() {
			s.PVFree = append(s.PVFree, pv.Free)
		}
	}
	lvs, err := m.lvm.ListLVs(ctx, name)
	if err != nil {
		return VGSpace{}, err
	}
	for _, lv := range lvs {
		if lv.IsThinPool() {
			s.Pools = append(s.Pools, PoolSpace{Name: lv.Name, Size: lv.Size, Free: lv.ThinPoolFree(),
				DataPercent: lv.DataPercent, MetadataPercent: lv.MetadataPercent})
		}
	}
	return s, nil
}
