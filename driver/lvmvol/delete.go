package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
)

// DeleteVolume wipes and removes the volume. A volume that does not exist is
// deleted already (CSI idempotency). A published volume is refused.
func (m *Manager) DeleteVolume(ctx context.Context, id volume.ID) error {
	lv, err := m.lookup(ctx, lvm.Fresh, id)
	if errors.Is(err, volume.ErrVolumeNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	// Nothing of a VG with a PV missing is changed (see changeableVG);
	// the lookup's report tells it.
	if err := changeableLV(lv); err != nil {
		return err
	}
	if lv.Open {
		// A copy into the volume (a clone or restore still being made)
		// holds its device open, and is moot now: stop it (and wait for
		// it), then look again. Its frozen point goes with the wipe
		// (finishDelete).
		m.jobs.stop(jobKey(jobCopyIn, lv.VGName, lv.Name))
		if lv, err = m.lookup(ctx, lvm.Fresh, id); errors.Is(err, volume.ErrVolumeNotFound) {
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
	lv, activated, err := m.markDeleting(ctx, lv)
	if err != nil {
		return fmt.Errorf("mark %s for deletion: %w", id, err)
	}
	return m.removeData(ctx, lvm.Fresh, lv, activated)
}

// markDeleting puts the deleting tag on lv where its removal takes more
// than one step, and returns lv as it then is; activated tells that it
// activated lv for the wipe (see wipe).
//
//   - A thin volume with no copy to undo (no copying tag) is removed by
//     lvremove alone: nothing comes before it that a crash could leave
//     half done, and until it runs the volume is as it was, so a retry
//     simply runs it. Its mark would be one lvchange for nothing.
//   - A thick volume is wiped first (finishDelete), and the mark must be
//     on before the first byte is zeroed: lvchange --addtag with -ay puts
//     it on and activates the LV for the wipe in one run, tag first (see
//     lvm.RetagAndActivate), so a crash in between leaves a marked,
//     inactive LV, which the retry activates (wipe). An LV that lvm2
//     would skip on plain activation (attr k; Carve's own LVs never carry
//     it) is marked and activated in two runs.
func (m *Manager) markDeleting(ctx context.Context, lv lvm.LV) (_ lvm.LV, activated bool, err error) {
	if lv.HasTag(tagDeleting) || lv.PoolLV != "" && !lv.HasTag(tagCopying) {
		return lv, false, nil
	}
	if lv.PoolLV == "" && !lv.Active && !lv.SkipActivation && !lv.HasTag(tagCopying) {
		if err := m.lvm.RetagAndActivate(ctx, lv.VGName, lv.Name, []string{tagDeleting}, nil, true); err != nil {
			return lv, false, err
		}
		lv.Active, activated = true, true
	} else if err := m.lvm.AddTags(ctx, lv.VGName, lv.Name, tagDeleting); err != nil {
		return lv, false, err
	}
	lv.Tags = append(slices.Clone(lv.Tags), tagDeleting)
	return lv, activated, nil
}

// removeData runs finishDelete of an LV marked deleting in a job (see
// jobs.go), detached from the caller's context: a CO that gives up and
// retries must not cut a long wipe short every time. In standalone mode
// its retries are told the operation is pending (by the driver's
// per-volume lock) until this one is done; in the agent they join the job.
//
// activated tells that the caller has just activated lv itself (see wipe).
func (m *Manager) removeData(ctx context.Context, r lvm.Reads, lv lvm.LV, activated bool) error {
	key := jobKey(jobWipe, lv.VGName, lv.Name)
	j, started := m.jobs.start(key, wipeBytes(lv), runner.DataBudget(int64(lv.Size)), func(ctx context.Context, mt *meter) error {
		return m.finishDelete(ctx, lvm.Fresh, lv, activated, mt) // a job: its own context, fresh reads
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
func (m *Manager) finishDelete(ctx context.Context, r lvm.Reads, lv lvm.LV, activated bool, mt *meter) error {
	ref := lv.VGName + "/" + lv.Name
	ctx, cancel := context.WithTimeout(ctx, runner.DataBudget(int64(lv.Size)))
	defer cancel()
	if lv.HasTag(tagCopying) {
		// Its copy was cut short: the frozen point it copied from holds
		// the source (held active, not deletable) until dropped.
		if err := m.dropFrozen(ctx, r, lv.VGName, lv.Name); err != nil {
			return err
		}
	}
	if lv.PoolLV == "" {
		// A write cache goes first, written back (writecache.go): the
		// wipe must reach the volume's own PVs, and the cachevol's
		// copies of its data must be wiped too.
		if err := m.dropCache(ctx, r, lv); err != nil {
			return err
		}
		if err := m.wipe(ctx, lv, activated, mt); err != nil {
			return err
		}
	}
	// lvremove from lv's own report (which lvm2 would take along: a COW
	// origin's attr tells), not from a new listing of the VG. The report
	// is the caller's, read before the deleting tag went on (or found it
	// on); the one change it could miss is a frozen point (COW snapshot)
	// made of this LV since, by a snapshot or clone that looked it up as
	// settled before the tag: the same race, with the wipe zeroing what
	// that copy reads, that a fresh listing right before lvremove only
	// narrowed, never closed. A thin LV, a frozen point itself or a
	// snapshot has no COW dependents at all.
	if err := m.lvm.RemoveLVOf(ctx, lv); err != nil {
		return fmt.Errorf("remove %s: %w", ref, err)
	}
	klog.InfoS("Removed logical volume", "lv", ref, "name", tagValue(lv, tagNamePrefix))
	return nil
}
