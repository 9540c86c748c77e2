package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// choiceSpaces reads the served VGs a class's several VGs (vgs) may use:
// the named ones this node serves (a class may name VGs some nodes lack),
// or those carrying its tag. One that lvm2 cannot read, or whose thin
// pool for t is missing or unsafe, is left out: it has no room for the
// class, and the others still serve.
func (m *Manager) choiceSpaces(ctx context.Context, r lvm.Reads, vgs volume.VGChoice, t volume.Type) ([]volume.VGSpace, error) {
	var out []volume.VGSpace
	for _, vg := range m.vgs {
		if vgs.Tag == "" && !slices.Contains(vgs.Names, vg) {
			continue
		}
		s, err := m.vgSpace(ctx, r, vg)
		if errors.Is(err, volume.ErrVGUnreadable) {
			klog.V(2).InfoS("Volume group left out of a class's choice: unreadable", "vg", vg, "err", err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("space of %s: %w", vg, err)
		}
		if !vgs.Matches(vg, s.Tags) {
			continue
		}
		if t.IsThin() {
			if _, err := m.thinPool(ctx, r, vg, t); err != nil {
				klog.V(2).InfoS("Volume group left out of a class's choice: no usable thin pool", "vg", vg, "pool", t.ThinPool, "err", err)
				continue
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// pickVG resolves a class's several VGs (req.VGs) to the one the new
// volume named name goes in. The pick is recorded by nothing but the LV
// that lvcreate makes, so the name is looked for in every candidate
// first: a retry of a create that carved (or crashed after lvcreate)
// finds its VG, whatever the space says now; only a name found nowhere
// is picked afresh (volume.PickVG), and a crash before lvcreate left
// nothing to find. A volume made from a source goes in the source's VG,
// which the choice must name.
func (m *Manager) pickVG(ctx context.Context, r lvm.Reads, req volume.CreateRequest, name string) (string, error) {
	spaces, err := m.choiceSpaces(ctx, r, *req.VGs, req.Type)
	if err != nil {
		return "", err
	}
	for _, s := range spaces {
		_, err := m.lvm.GetLV(ctx, r, s.Name, name)
		if err == nil {
			return s.Name, nil
		}
		if !errors.Is(err, lvm.ErrNotFound) {
			return "", fmt.Errorf("look up %s/%s: %w", s.Name, name, err)
		}
	}
	if req.Source != nil {
		if !slices.ContainsFunc(spaces, func(s volume.VGSpace) bool { return s.Name == req.Source.ID.VG }) {
			return "", fmt.Errorf("the source lives in %s, not one of %s this node can use: %w", req.Source.ID.VG, req.VGs, volume.ErrSourceMismatch)
		}
		return req.Source.ID.VG, nil
	}
	return volume.PickVG(*req.VGs, spaces, req.Type, m.overprovision, req.RequiredBytes)
}
