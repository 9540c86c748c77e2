package lvmvol

import (
	"carve.dev/carve/lvm"
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
)

// Capacity reports what volumes of type t can still get from the VGs of
// vgs on node: none on any node but this one, which is the only node this
// manager can carve on. The rules are CapacityOf's, added up over a
// class's several VGs (CapacityOfChoice). It is a query (lvm.Cached).
func (m *Manager) Capacity(ctx context.Context, node string, vgs volume.VGChoice, t volume.Type) (volume.Capacity, error) {
	r := lvm.Cached
	if node != "" && node != m.node {
		return volume.Capacity{}, nil
	}
	if vg, ok := vgs.Single(); ok {
		return m.vgCapacity(ctx, r, vg, t)
	}
	spaces, err := m.choiceSpaces(ctx, r, vgs, t)
	if err != nil {
		return volume.Capacity{}, err
	}
	return volume.CapacityOfChoice(vgs, spaces, t, m.overprovision), nil
}

// vgCapacity is Capacity of one VG, which must be served.
func (m *Manager) vgCapacity(ctx context.Context, r lvm.Reads, vg string, t volume.Type) (volume.Capacity, error) {
	if err := m.checkVG(vg); err != nil {
		return volume.Capacity{}, err
	}
	if t.IsThin() {
		// Refuses unsafe pools, and activates an inactive one so that its
		// usage can be read.
		if _, err := m.thinPool(ctx, r, vg, t); err != nil {
			return volume.Capacity{}, err
		}
	}
	space, err := m.vgSpace(ctx, r, vg)
	if err != nil {
		return volume.Capacity{}, fmt.Errorf("capacity of %s: %w", vg, err)
	}
	if space.MetadataFull() {
		klog.InfoS("Warning: VG metadata area full, capacity reported as 0: a PV with a larger metadata area (pvcreate --metadatasize) makes room",
			"vg", vg, "metadataFree", space.MetadataFree, "metadataSize", space.MetadataSize)
	}
	return volume.CapacityOf(space, t, m.overprovision), nil
}
