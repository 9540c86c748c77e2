package lvmvol

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
)

// DeleteVolume wipes and removes the volume. A volume that does not exist is
// deleted already (CSI idempotency). A published volume is refused.
func (m *Manager) DeleteVolume(ctx context.Context, id volume.ID) error {
	lv, err := m.lookup(ctx, id)
	if errors.Is(err, volume.ErrVolumeNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := m.changeableVG(ctx, id.VG); err != nil {
		return err
	}
	if lv.Open {
		// A copy into the volume (a clone or restore still being made)
		// holds its device open, and is moot now: stop it (and wait for
		// it), then look again. Its frozen point goes with the wipe
		// (finishDelete).
		m.jobs.stop(jobKey(jobCopyIn, lv.VGName, lv.Name))
		if lv, err = m.lookup(ctx, id); errors.Is(err, volume.ErrVolumeNotFound) {
			return nil
		} else if err != nil {
			return err
		}
	}
	if lv.Open {
		return fmt.Errorf("volume %s is open on node %s: %w", id, m.node, volume.ErrInUse)
	}
	// An active LV is published, unless a create or delete was interrupted
	// (it is active while being created or wiped).
	if isPublished(lv) && isSettled(lv) {
		return fmt.Errorf("volume %s is still published (active): %w", id, volume.ErrInUse)
	}
	if lv.HasCOWSnapshots() {
		return fmt.Errorf("volume %s is being copied into a snapshot or clone; retry when that is done: %w", id, volume.ErrInUse)
	}
	// A copy into the volume that has not opened it yet is moot as well:
	// stop it before the wipe, which would otherwise race its writes.
	m.jobs.stop(jobKey(jobCopyIn, lv.VGName, lv.Name))
	if !lv.HasTag(tagDeleting) {
		if err := m.lvm.AddTags(ctx, lv.VGName, lv.Name, tagDeleting); err != nil {
			return fmt.Errorf("mark %s for deletion: %w", id, err)
		}
	}
	return m.removeData(ctx, lv)
}

// removeData runs finishDelete of an LV marked deleting in a job (see
// jobs.go), detached from the caller's context: a CO that gives up and
// retries must not cut a long wipe short every time. In standalone mode
// its retries are told the operation is pending (by the driver's
// per-volume lock) until this one is done; in the agent they join the job.
func (m *Manager) removeData(ctx context.Context, lv lvm.LV) error {
	key := jobKey(jobWipe, lv.VGName, lv.Name)
	j, started := m.jobs.start(key, wipeBytes(lv), runner.DataBudget(int64(lv.Size)), func(ctx context.Context, mt *meter) error {
		return m.finishDelete(ctx, lv, mt)
	})
	return m.awaitData(ctx, key, jobWipe, lv, j, started)
}

// wipeBytes is what finishDelete zeroes of lv: thin LVs are not wiped.
func wipeBytes(lv lvm.LV) int64 {
	if lv.PoolLV != "" {
		return 0
	}
	return int64(lv.Size)
}

// finishDelete zeroes and removes an LV marked deleting. Thin LVs are not
// zeroed: their blocks go back to the pool, which zeroes every block it
// provisions again (Carve refuses pools that do not, see thinPool), and
// zeroing a thin LV would first allocate all of it. The whole delete is
// bounded by a deadline sized for the LV (each zeroed chunk also by its
// own); a wipe cut short resumes from its recorded progress next time.
func (m *Manager) finishDelete(ctx context.Context, lv lvm.LV, mt *meter) error {
	ref := lv.VGName + "/" + lv.Name
	ctx, cancel := context.WithTimeout(ctx, runner.DataBudget(int64(lv.Size)))
	defer cancel()
	if lv.HasTag(tagCopying) {
		// Its copy was cut short: the frozen point it copied from holds
		// the source (held active, not deletable) until dropped.
		if err := m.dropFrozen(ctx, lv.VGName, lv.Name); err != nil {
			return err
		}
	}
	if lv.PoolLV == "" {
		if err := m.wipe(ctx, lv, mt); err != nil {
			return err
		}
	}
	if err := m.lvm.RemoveLV(ctx, lv.VGName, lv.Name); err != nil {
		return fmt.Errorf("remove %s: %w", ref, err)
	}
	klog.InfoS("Removed logical volume", "lv", ref, "name", tagValue(lv, tagNamePrefix))
	return nil
}
