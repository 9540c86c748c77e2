package lvmvol

import (
	"context"
	"fmt"
	"slices"

	"carve.dev/carve/lvm"
)

// Capacity is what a volume group (or thin pool) can still give.
type Capacity struct {
	// AvailableBytes is the space left for volumes of the asked type.
	AvailableBytes int64
	// MaximumVolumeBytes is the largest single volume of that type that
	// fits now; the scheduler's capacity tracking compares requests to it.
	MaximumVolumeBytes int64
}

// Capacity reports what volumes of type t can still get from vg on node:
// none on any node but this one, which is the only node this manager can
// carve on.
//   - linear: the VG's free space, all of it usable by one LV.
//   - raid1 with N legs: each leg needs its own PV, so the largest volume is
//     the N-th largest PV's free space (less a metadata extent); all legs
//     together may take the VG's free space divided by N.
//   - striped over N PVs: N times the N-th largest PV's free space.
//   - thin: the pool's free data space times the over-provisioning ratio.
func (m *Manager) Capacity(ctx context.Context, node, vg string, t Type) (Capacity, error) {
	if node != "" && node != m.node {
		return Capacity{}, nil
	}
	if err := m.checkVG(vg); err != nil {
		return Capacity{}, err
	}
	if t.IsThin() {
		pool, err := m.thinPool(ctx, vg, t)
		if err != nil {
			return Capacity{}, err
		}
		room := int64(m.thinRoom(pool))
		return Capacity{AvailableBytes: room, MaximumVolumeBytes: room}, nil
	}
	info, err := m.lvm.GetVG(ctx, vg)
	if err != nil {
		return Capacity{}, fmt.Errorf("capacity of %s: %w", vg, err)
	}
	legs := max(t.Mirrors+1, t.Stripes, 1)
	if legs == 1 {
		free := int64(info.Free)
		return Capacity{AvailableBytes: free, MaximumVolumeBytes: free}, nil
	}
	return m.spreadCapacity(ctx, info, t, legs)
}

// spreadCapacity is the capacity for LVs spread over legs distinct PVs.
func (m *Manager) spreadCapacity(ctx context.Context, vg lvm.VG, t Type, legs int) (Capacity, error) {
	pvs, err := m.lvm.ListVGPVs(ctx, vg.Name)
	if err != nil {
		return Capacity{}, fmt.Errorf("capacity of %s: %w", vg.Name, err)
	}
	var free []uint64
	for _, pv := range pvs {
		if pv.Allocatable() {
			free = append(free, pv.Free)
		}
	}
	if len(free) < legs {
		return Capacity{}, nil
	}
	slices.Sort(free)
	slices.Reverse(free)
	perLeg := free[legs-1]
	if t.Mirrors > 0 {
		perLeg -= min(perLeg, vg.ExtentSize) // each raid1 leg keeps a metadata extent
		return Capacity{AvailableBytes: int64(vg.Free / uint64(legs)), MaximumVolumeBytes: int64(perLeg)}, nil
	}
	return Capacity{AvailableBytes: int64(vg.Free), MaximumVolumeBytes: int64(perLeg) * int64(legs)}, nil
}
