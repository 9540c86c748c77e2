package lvmvol

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// PublishVolume makes the volume usable on node: it activates the LV and
// returns its device path. Activating an active LV is a no-op in LVM, so the
// call is idempotent. A volume lives on one node: publishing it anywhere else
// is refused.
func (m *Manager) PublishVolume(ctx context.Context, id volume.ID, node string) (string, error) {
	if node != m.node {
		return "", fmt.Errorf("node %q (this driver serves %q): %w", node, m.node, volume.ErrNodeNotFound)
	}
	unlock, err := m.lockActivation(ctx, id.VG, id.LV)
	if err != nil {
		return "", err
	}
	defer unlock()
	lv, err := m.lookupSettled(ctx, lvm.Fresh, id)
	if err != nil {
		return "", err
	}
	if lv.HasTag(tagHeld) {
		// Held for a copy: the publish takes the activation over, so that
		// the end of the copy leaves it active.
		if err := m.lvm.RemoveTags(ctx, id.VG, id.LV, tagHeld); err != nil {
			return "", fmt.Errorf("publish %s: %w", id, err)
		}
		lv.Active = false // count it against the limit, activate if needed
	}
	if !lv.Live() {
		// Active but not live: an activation cut short (lvm.LV.Live),
		// which this one completes. It counted as published already.
		if !lv.Active {
			if err := m.checkPublishLimit(ctx); err != nil {
				return "", err
			}
		}
		if err := m.lvm.Activate(ctx, id.VG, id.LV); err != nil {
			return "", fmt.Errorf("activate %s: %w", id, err)
		}
		klog.InfoS("Published volume: LV activated", "volume", id, "node", node)
	}
	return devicePath(id.VG, id.LV), nil
}

// checkPublishLimit refuses one more published volume beyond the limit. Two
// publishes racing for the last slot can both pass: the limit is the
// scheduler's contract, and the CO already counts attachments itself.
// The count may come from a cached report (a query's read): activations
// are Carve's own changes, which a cached report never misses.
func (m *Manager) checkPublishLimit(ctx context.Context) error {
	if m.maxPublished <= 0 {
		return nil
	}
	vols, err := m.ListVolumes(ctx, lvm.Cached)
	if err != nil {
		return err
	}
	n := 0
	for _, v := range vols {
		if v.Published {
			n++
		}
	}
	if n >= m.maxPublished {
		return fmt.Errorf("node %s already has %d volumes published, its limit: %w", m.node, n, volume.ErrPublishLimit)
	}
	return nil
}

// UnpublishVolume deactivates the LV once nothing on the node holds it open.
// A volume or node that does not exist is unpublished already: CSI asks for
// success when the volume "can be safely regarded as unpublished".
func (m *Manager) UnpublishVolume(ctx context.Context, id volume.ID, node string) error {
	if node != "" && node != m.node {
		return nil
	}
	unlock, err := m.lockActivation(ctx, id.VG, id.LV)
	if err != nil {
		return err
	}
	defer unlock()
	// A CO unpublishes after the node unstaged the volume, whose report
	// the node calls read (csi's resolveStaged): a recent report answers,
	// as for a query. It may decide to deactivate: every change of Carve's
	// is in the report (see lvm.Cache), so it can be stale only by a change
	// made by hand, and deactivating a volume that was deactivated so is a
	// no-op. It may not decide that there is nothing to do: that takes a
	// fresh read, or a volume activated by hand would stay active while
	// the CO counts it detached.
	lv, err := m.lookup(ctx, lvm.Cached, id)
	if err != nil || !isPublished(lv) {
		lv, err = m.lookup(ctx, lvm.Fresh, id)
	}
	if errors.Is(err, volume.ErrVolumeNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !isPublished(lv) {
		return nil // inactive, or only held for a copy that will release it
	}
	if lv.HasCOWSnapshots() {
		// A copy into a thick snapshot or clone reads the volume's frozen
		// point, which lvm2 keeps active only with the volume: deactivating
		// would fail while the copy has it open, and otherwise take the
		// frozen point down, after which lvm2 refuses to activate it again
		// without the volume. Unpublish by holding instead: the volume
		// stays active for the copy but counts as unpublished
		// (isPublished), and the copy's release deactivates it when done.
		// A publish before that takes the activation back (PublishVolume).
		if err := m.lvm.AddTags(ctx, id.VG, id.LV, tagHeld); err != nil {
			return fmt.Errorf("unpublish %s while a copy reads it: %w", id, err)
		}
		klog.InfoS("Unpublished volume: held active until the copy reading it is done", "volume", id, "node", m.node)
		return nil
	}
	if err := m.removeIdleLayer(ctx, lv); err != nil {
		return fmt.Errorf("volume %s on node %s: %w", id, m.node, err)
	}
	if err := m.lvm.Deactivate(ctx, id.VG, id.LV); err != nil {
		if errors.Is(err, lvm.ErrBusy) {
			return fmt.Errorf("volume %s is still open on node %s (not unstaged?): %w", id, m.node, volume.ErrInUse)
		}
		return fmt.Errorf("deactivate %s: %w", id, err)
	}
	klog.InfoS("Unpublished volume: LV deactivated", "volume", id, "node", m.node)
	return nil
}
