package lvmvol

import (
	"context"
	"fmt"
)

// Capacity is what a volume group can still give.
type Capacity struct {
	// AvailableBytes is the free space of the VG.
	AvailableBytes int64
	// MaximumVolumeBytes is the largest single volume that fits: a linear LV
	// may span every PV of the VG, so it is the whole free space.
	MaximumVolumeBytes int64
}

// Capacity reports the free space of vg on node: none on any node but this
// one, which is the only node this manager can carve on.
func (m *Manager) Capacity(ctx context.Context, node, vg string) (Capacity, error) {
	if node != "" && node != m.node {
		return Capacity{}, nil
	}
	if err := m.checkVG(vg); err != nil {
		return Capacity{}, err
	}
	info, err := m.lvm.GetVG(ctx, vg)
	if err != nil {
		return Capacity{}, fmt.Errorf("capacity of %s: %w", vg, err)
	}
	free := int64(info.Free)
	return Capacity{AvailableBytes: free, MaximumVolumeBytes: free}, nil
}
