package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
)

// Snapshots.
//
// A snapshot must outlive its source volume and be restorable, thin or thick.
//   - Thin volume: a thin snapshot in the same pool. Instant, shares blocks,
//     independent of its origin once taken (deleting the origin keeps it).
//   - Thick volume: a classic COW snapshot is not enough (it dies with its
//     origin and grows until it overflows). Carve freezes the volume with a
//     short-lived COW snapshot at the moment of the request, copies that
//     frozen image into an independent thick LV, then drops the COW
//     snapshot. The snapshot is ready_to_use only once the copy is done.
//
// Crash safety of the thick path, step by step (each step is redone by the
// next CreateSnapshot call of the same name, which the CO keeps making until
// the snapshot is ready):
//  1. the COW snapshot (frozen point) is made first, so the image is the
//     volume as it was when the snapshot was asked for;
//  2. the snapshot LV is created with the copying tag;
//  3. the copy runs in the background, bounded by a deadline sized for the
//     volume; a copy interrupted by a crash or its deadline resumes from
//     the frozen point, which still exists, where its progress record says
//     (see progress.go);
//  4. the frozen point is dropped, the snapshot LV deactivated, then the
//     copying tag dropped: a snapshot LV with the copying tag and no frozen
//     point has therefore been copied fully, and a ready one is inactive.
//     If the frozen point overflowed, the snapshot LV is deleted instead and
//     the next call starts over from a new frozen point.
//
// Steps 1-2 are createThickSnapshot's (freeze, then CreateLV), 3-4 the
// copy job's (startSnapshotCopy, finishSnapshotCopy); a retry finds which
// by the LVs (adoptSnapshot): no snapshot LV, step 1 again (freeze adopts
// a whole frozen point); the copying tag, the job again, which reads for
// the frozen point to tell step 3 from step 4. The thick path keeps this
// shape rather than one step table because its two halves run in two
// places, the call and the background job.
//
// A snapshot's tags (tags.go): snapshot, source, name, created (thin),
// copying (thick, until its copy is done), encrypted.

func (m *Manager) snapshotOf(lv lvm.LV) volume.Snapshot {
	s := volume.Snapshot{
		ID:        volume.ID{Node: m.node, VG: lv.VGName, LV: lv.Name},
		Name:      tagValue(lv, tagNamePrefix),
		Source:    volume.ID{Node: m.node, VG: lv.VGName, LV: tagValue(lv, tagSourcePrefix)},
		SizeBytes: int64(lv.Size),
		CreatedAt: createdAt(lv),
		Ready:     !lv.HasTag(tagCopying),
		Encrypted: lv.HasTag(tagEncrypted),
	}
	if key := tagValue(lv, tagGroupPrefix); key != "" {
		s.Group = m.groupID(lv.VGName, key)
	}
	return s
}

// createdAt is when snapshot lv was made: its created tag, else lvm2's
// lv_time (a thick snapshot; a thin one made before the tag was).
func createdAt(lv lvm.LV) time.Time {
	if s, err := strconv.ParseInt(tagValue(lv, tagCreatedPrefix), 10, 64); err == nil && s > 0 {
		return time.Unix(s, 0).UTC()
	}
	return lv.CreationTime
}

func isSnapshot(lv lvm.LV) bool { return lv.HasTag(tagSnapshot) }

// CreateSnapshot snapshots the volume source under name, or returns the
// snapshot an earlier call made (idempotent by name; another source is
// ErrNameConflict).
func (m *Manager) CreateSnapshot(ctx context.Context, name string, source volume.ID) (volume.Snapshot, error) {
	// The source and the snapshot's name are looked up in one fresh
	// report of the VG (see sharedReads): a CO repeats the call each
	// second until a thick snapshot is ready.
	r := sharedReads()
	src, err := m.lookupSettled(ctx, r, source)
	if err != nil {
		return volume.Snapshot{}, err
	}
	lvName := volume.SnapshotLVName(name)
	tags := []string{tagSnapshot, tagSourcePrefix + src.Name, tagNamePrefix + name}
	if lvm.ValidateTag(tags[2]) != nil {
		tags = tags[:2]
	}
	if src.HasTag(tagEncrypted) {
		tags = append(tags, tagEncrypted)
	}
	if src.PoolLV == "" {
		lv, err := m.lvm.GetLV(ctx, r, source.VG, lvName)
		switch {
		case err == nil:
			return m.adoptSnapshot(ctx, r, lv, name, src)
		case !errors.Is(err, lvm.ErrNotFound):
			return volume.Snapshot{}, fmt.Errorf("look up snapshot %s/%s: %w", source.VG, lvName, err)
		}
		// The VG's report gives the room of the copy and the frozen
		// point, and tells a PV missing: Carve changes nothing of such
		// a VG (changeableVG).
		vg, err := m.changeableVG(ctx, r, source.VG)
		if err != nil {
			return volume.Snapshot{}, err
		}
		return m.createThickSnapshot(ctx, r, name, src, vg, lvName, tags)
	}
	// Nothing of a VG with a PV missing is changed (see changeableVG),
	// and a thin snapshot's lvcreate is its name's lookup (below), so
	// src's report, read for this call, is checked first: it tells the
	// VG's missing PVs, no vgs needed.
	if err := changeableLV(src); err != nil {
		return volume.Snapshot{}, err
	}
	// The pool is in the report src was read from (shared reads). An
	// inactive pool reports no usage, and lvm2 checks none then.
	pool, err := m.lvm.GetLV(ctx, r, source.VG, src.PoolLV)
	if err != nil {
		return volume.Snapshot{}, fmt.Errorf("thin pool of %s: %w", source, err)
	}
	if err := checkNewThin(pool); pool.Active && err != nil {
		return volume.Snapshot{}, fmt.Errorf("snapshot %q of %s: %w", name, source, err)
	}
	// A thin snapshot is one lvcreate of src, whose report is at hand:
	// made inactive (-an), as nothing should write to a snapshot, in the
	// commit that makes it, so no lvchange -an follows. Its creation time
	// is a tag of that commit, so it is not read back: a repeated call
	// reads the LV, tag and all, and answers the same time. No lookup of
	// the name first: lvcreate fails on a taken one having changed
	// nothing, and only then is the LV read and judged (as CreateVolume
	// does).
	tags = append(tags, tagCreatedPrefix+strconv.FormatInt(time.Now().Unix(), 10))
	lv, err := m.snapshotLV(ctx, src, lvName, lvm.SnapshotOptions{Tags: tags, Inactive: true, SkipReadBack: true})
	if errors.Is(err, lvm.ErrAlreadyExists) {
		existing, lerr := m.lvm.GetLV(ctx, r, source.VG, lvName)
		if lerr != nil {
			return volume.Snapshot{}, fmt.Errorf("look up snapshot %s/%s: %w", source.VG, lvName, lerr)
		}
		return m.adoptSnapshot(ctx, r, existing, name, src)
	}
	if err != nil {
		return volume.Snapshot{}, fmt.Errorf("snapshot %q of %s: %w", name, source, err)
	}
	klog.InfoS("Created thin snapshot", "snapshot", name, "lv", source.VG+"/"+lvName, "source", source)
	return m.snapshotOf(lv), nil
}

// createThickSnapshot runs steps 1-3 of the thick path (see above).
func (m *Manager) createThickSnapshot(ctx context.Context, r lvm.Reads, name string, src lvm.LV, vg lvm.VG, lvName string, tags []string) (volume.Snapshot, error) {
	if need := lvm.RoundUp(src.Size, vg.ExtentSize) + lvm.RoundUp(cowSizeFor(src.Size), vg.ExtentSize); need > vg.Free {
		return volume.Snapshot{}, fmt.Errorf("thick snapshot of %s needs %s (copy and frozen point), volume group %s has %s free: %w",
			src.Name, lvm.FormatSize(need), vg.Name, lvm.FormatSize(vg.Free), lvm.ErrNoSpace)
	}
	if err := m.freeze(ctx, r, src, lvName); err != nil {
		return volume.Snapshot{}, err
	}
	// A thick snapshot is a plain linear LV (the zero Type) of the source's size.
	lv, err := m.lvm.CreateLV(ctx, lvOptions(volume.Type{}, vg, lvName, src.Size, append(tags, tagCopying)))
	if err != nil {
		return volume.Snapshot{}, fmt.Errorf("snapshot %q of %s: %w", name, src.Name, err)
	}
	klog.InfoS("Created thick snapshot; copying its data", "snapshot", name, "lv", src.VGName+"/"+lvName, "bytes", lv.Size)
	return m.awaitCopy(ctx, lv)
}

// copyGrace is how long CreateSnapshot waits for a thick copy before it
// answers ready_to_use=false: small volumes are ready in the first answer,
// which spares the CO a polling round.
const copyGrace = 3 * time.Second

// awaitCopy starts (or joins) the copy of snapshot lv, waits up to
// copyGrace, and reports the snapshot as it then is. A copy that failed is
// the caller's error, once (the next call starts it again): answered as
// not ready instead, a copy failing on a bad disk would look to the CO
// like one still running, for ever (found on real disks by test/faults).
func (m *Manager) awaitCopy(ctx context.Context, lv lvm.LV) (volume.Snapshot, error) {
	key, job := m.startSnapshotCopy(lv)
	finished, err := m.jobs.await(ctx, key, job, copyGrace)
	if err != nil {
		return volume.Snapshot{}, fmt.Errorf("copy into snapshot %s/%s: %w", lv.VGName, lv.Name, err)
	}
	if !finished {
		return m.snapshotOf(lv), nil // still copying
	}
	return m.snapshotOf(copied(lv)), nil
}

// copied is snapshot lv once its copy job succeeded: the job dropped the
// copying tag last (step 4), so no lvs is needed to tell.
func copied(lv lvm.LV) lvm.LV {
	lv.Tags = slices.DeleteFunc(slices.Clone(lv.Tags), func(t string) bool { return t == tagCopying })
	return lv
}

// adoptSnapshot judges an existing snapshot LV for a CreateSnapshot retry,
// and resumes its copy when no copy runs.
func (m *Manager) adoptSnapshot(ctx context.Context, r lvm.Reads, lv lvm.LV, name string, src lvm.LV) (volume.Snapshot, error) {
	if !isSnapshot(lv) || tagValue(lv, tagSourcePrefix) != src.Name {
		return volume.Snapshot{}, fmt.Errorf("snapshot %q exists with another source: %w", name, volume.ErrNameConflict)
	}
	if lv.HasTag(tagDeleting) || lv.HasTag(tagCopying) {
		// Its delete or copy goes on below, changing the VG; a ready
		// snapshot is only answered (as adopt does for a volume).
		if err := changeableLV(lv); err != nil {
			return volume.Snapshot{}, err
		}
	}
	if lv.HasTag(tagDeleting) {
		if err := m.removeData(ctx, r, lv, false); err != nil {
			return volume.Snapshot{}, err
		}
		return m.CreateSnapshot(ctx, name, volume.ID{Node: m.node, VG: src.VGName, LV: src.Name})
	}
	if lv.HasTag(tagCopying) {
		return m.awaitCopy(ctx, lv)
	}
	return m.snapshotOf(lv), nil
}

// startSnapshotCopy runs steps 3-4 in the background, unless they run.
func (m *Manager) startSnapshotCopy(lv lvm.LV) (string, *job) {
	key := jobKey(jobSnapshotCopy, lv.VGName, lv.Name)
	j, _ := m.jobs.start(key, int64(lv.Size), runner.DataBudget(int64(lv.Size)), func(ctx context.Context, mt *meter) error {
		return m.finishSnapshotCopy(ctx, lvm.Fresh, lv, mt) // a job: its own context, fresh reads
	})
	return key, j
}

func (m *Manager) finishSnapshotCopy(ctx context.Context, r lvm.Reads, lv lvm.LV, mt *meter) error {
	frozen, err := m.lvm.GetLV(ctx, r, lv.VGName, frozenName(lv.Name))
	switch {
	case err == nil:
		// lv is the report the job was started with (see copyLV); the
		// copy releases the source when it drops the frozen point.
		err = m.copyFrozenLV(ctx, r, frozen, lv, tagValue(lv, tagSourcePrefix), lv.Size, mt)
		if tornImage(err) {
			// The image is torn: drop it; the CO's next call starts over.
			return errors.Join(err, m.finishDelete(ctx, r, lv, false, nil))
		}
		if err != nil {
			return err
		}
	case errors.Is(err, lvm.ErrNotFound):
		// No frozen point left: the copy completed (step 4). A crash right
		// after dropping the frozen point may have left the source held.
		if err := m.release(ctx, r, lv.VGName, tagValue(lv, tagSourcePrefix)); err != nil {
			return err
		}
	default:
		return err
	}
	// Deactivate, then drop the copying tag: two lvchanges, because the
	// one lvchange that does both (lvm.RetagAndActivate) commits the tag
	// first, and a crash before its deactivation left a ready snapshot
	// active for good: no later call of a ready snapshot deactivates it,
	// and its device stayed open to writes (the soak found it). In this
	// order a crash in between leaves the copying tag on an inactive LV
	// with no frozen point, which the next call finishes here.
	if err := m.lvm.Deactivate(ctx, lv.VGName, lv.Name); err != nil {
		return fmt.Errorf("deactivate snapshot %s/%s after its copy: %w", lv.VGName, lv.Name, err)
	}
	if err := m.lvm.RemoveTags(ctx, lv.VGName, lv.Name, tagCopying); err != nil {
		return err
	}
	klog.InfoS("Thick snapshot ready", "lv", lv.VGName+"/"+lv.Name, "bytes", lv.Size)
	return nil
}

// lookupSnapshot finds the settled snapshot LV behind id.
func (m *Manager) lookupSnapshot(ctx context.Context, r lvm.Reads, id volume.ID) (lvm.LV, error) {
	lv, err := m.lookupLV(ctx, r, id)
	if errors.Is(err, volume.ErrVolumeNotFound) {
		return lvm.LV{}, fmt.Errorf("snapshot %s: %w", id, volume.ErrSnapshotNotFound)
	}
	if err != nil {
		return lvm.LV{}, err
	}
	if !isSnapshot(lv) {
		return lvm.LV{}, fmt.Errorf("snapshot %s: %w", id, volume.ErrSnapshotNotFound)
	}
	return lv, nil
}

// GetSnapshot returns a snapshot, ready or not.
func (m *Manager) GetSnapshot(ctx context.Context, r lvm.Reads, id volume.ID) (volume.Snapshot, error) {
	lv, err := m.lookupSnapshot(ctx, r, id)
	if err != nil {
		return volume.Snapshot{}, err
	}
	if lv.HasTag(tagDeleting) {
		return volume.Snapshot{}, fmt.Errorf("snapshot %s is being deleted: %w", id, volume.ErrSnapshotNotFound)
	}
	return m.snapshotOf(lv), nil
}

// ListSnapshots returns every snapshot on this node, sorted by ID. Its
// caller decides whether it is a query (see GetVolume).
func (m *Manager) ListSnapshots(ctx context.Context, r lvm.Reads) ([]volume.Snapshot, error) {
	var out []volume.Snapshot
	for _, vg := range m.vgs {
		lvs, err := m.lvm.ListLVs(ctx, r, vg)
		if err != nil {
			return nil, fmt.Errorf("list snapshots in %s: %w", vg, err)
		}
		for _, lv := range lvs {
			if isSnapshot(lv) && !lv.HasTag(tagDeleting) {
				out = append(out, m.snapshotOf(lv))
			}
		}
	}
	volume.SortByID(out, func(s volume.Snapshot) volume.ID { return s.ID })
	return out, nil
}

// DeleteSnapshot stops a running copy, drops a frozen point, then deletes
// the snapshot LV like a volume (thick data is wiped first). A snapshot that
// does not exist is deleted already.
func (m *Manager) DeleteSnapshot(ctx context.Context, id volume.ID) error {
	lv, err := m.lookupSnapshot(ctx, lvm.Fresh, id)
	if errors.Is(err, volume.ErrSnapshotNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if key := tagValue(lv, tagGroupPrefix); key != "" {
		return fmt.Errorf("%w: snapshot %s is a member of group snapshot %s: delete the group (see group.go)",
			volume.ErrInvalidArgument, id, m.groupID(id.VG, key))
	}
	return m.deleteSnapshotLV(ctx, lvm.Fresh, lv)
}

// deleteSnapshotLV is DeleteSnapshot of snapshot LV lv, read by the caller.
func (m *Manager) deleteSnapshotLV(ctx context.Context, r lvm.Reads, lv lvm.LV) error {
	id := volume.ID{Node: m.node, VG: lv.VGName, LV: lv.Name}
	// lvm2 takes lvchange and lvremove with a PV missing, and then keeps
	// the PV marked missing: Carve changes nothing of such a VG (see
	// changeableVG); the lookup's report tells it.
	if err := changeableLV(lv); err != nil {
		return err
	}
	// Its block metadata reads end now, with an error that says so, not
	// with a stream that looks complete (blocks.go).
	defer m.stopReads(lv)()
	if !lv.HasTag(tagCopying) {
		// Ready: no copy into it runs, and no frozen point of it is
		// left (the copy drops it before the copying tag, step 4). So
		// it goes as a volume does (markDeleting): a thin snapshot by
		// lvremove alone, a thick one marked and activated in one
		// lvchange, wiped, removed.
		lv, activated, err := m.markDeleting(ctx, lv)
		if err != nil {
			return fmt.Errorf("mark %s for deletion: %w", id, err)
		}
		return m.removeData(ctx, r, lv, activated)
	}
	m.jobs.stop(jobKey(jobSnapshotCopy, id.VG, id.LV))
	if !lv.HasTag(tagDeleting) {
		if err := m.lvm.AddTags(ctx, id.VG, id.LV, tagDeleting); err != nil {
			return fmt.Errorf("mark %s for deletion: %w", id, err)
		}
	}
	if err := m.dropFrozen(ctx, r, id.VG, id.LV); err != nil {
		return err
	}
	return m.removeData(ctx, r, lv, false)
}

// dropFrozen removes the frozen point of target, if there is one, and
// releases the volume it froze.
func (m *Manager) dropFrozen(ctx context.Context, r lvm.Reads, vg, target string) error {
	frozen, found, err := m.findLV(ctx, r, vg, frozenName(target))
	if !found {
		return err
	}
	return m.dropFrozenLV(ctx, r, frozen, frozen.Origin)
}

// dropFrozenLV is dropFrozen of the frozen point the caller has read: a
// snapshot (COW or thin), which nothing depends on, so its own report is
// enough for lvremove (lvm.RemoveLVOf). origin is the volume to release:
// the frozen point's own, or, for one that is no snapshot of it any
// more (copyFrozenLV), the volume it was made of.
func (m *Manager) dropFrozenLV(ctx context.Context, r lvm.Reads, frozen lvm.LV, origin string) error {
	if err := m.lvm.RemoveLVOf(ctx, frozen); err != nil && !errors.Is(err, lvm.ErrNotFound) {
		return fmt.Errorf("drop frozen point %s/%s: %w", frozen.VGName, frozen.Name, err)
	}
	return m.release(ctx, r, frozen.VGName, origin)
}
