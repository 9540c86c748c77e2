package lvmvol

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// ExpandVolume grows the volume to at least requiredBytes (rounded up to
// extents) and returns it. A volume already that large is returned as is,
// so repeated calls are harmless; shrinking is refused
// (volume.CheckNoShrink). The space is checked
// before lvextend, as for a create.
func (m *Manager) ExpandVolume(ctx context.Context, id volume.ID, requiredBytes, limitBytes int64) (volume.Volume, error) {
	lv, err := m.lookupSettled(ctx, lvm.Fresh, id)
	if err != nil {
		return volume.Volume{}, err
	}
	if err := volume.CheckNoShrink(id, lv.Size, limitBytes); err != nil {
		return volume.Volume{}, err
	}
	if requiredBytes <= 0 || uint64(requiredBytes) <= lv.Size {
		return m.volumeOf(lv), nil
	}
	t := typeOf(lv)
	target := lvm.RoundUp(uint64(requiredBytes), lv.ExtentSize*uint64(max(1, t.Stripes)))
	if limitBytes > 0 && target > uint64(limitBytes) {
		return volume.Volume{}, fmt.Errorf("volume %s: %s rounded up to whole extents is %s, above the limit %s: %w",
			id, lvm.FormatSize(uint64(requiredBytes)), lvm.FormatSize(target), lvm.FormatSize(uint64(limitBytes)), volume.ErrOutOfRange)
	}
	if err := m.checkGrowth(ctx, lvm.Fresh, lv, t, target-lv.Size); err != nil {
		return volume.Volume{}, fmt.Errorf("expand %s: %w", id, err)
	}
	if err := m.lvm.ExtendLV(ctx, id.VG, id.LV, target); err != nil {
		return volume.Volume{}, fmt.Errorf("expand %s: %w", id, err)
	}
	klog.InfoS("Expanded logical volume", "volume", id, "from", lv.Size, "to", target)
	if lv, err = m.lvm.GetLV(ctx, lvm.Fresh, id.VG, id.LV); err != nil {
		return volume.Volume{}, fmt.Errorf("expand %s: %w", id, err)
	}
	return m.volumeOf(lv), nil
}

// checkGrowth refuses an extension by delta bytes that cannot fit.
func (m *Manager) checkGrowth(ctx context.Context, r lvm.Reads, lv lvm.LV, t volume.Type, delta uint64) error {
	vg, err := m.changeableVG(ctx, r, lv.VGName)
	if err != nil {
		return err
	}
	return m.checkRoom(ctx, r, vg, lvOptions(t, vg, lv.Name, delta, nil), t)
}
