package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/transfer"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
)

// Restore and clone: a volume created from a snapshot or another volume.
//   - Thin source, thin target in the same pool: a thin snapshot of the
//     source, made writable and grown to the asked size. Instant.
//   - Otherwise the data is copied into a new LV of the asked type: from a
//     snapshot LV directly (it never changes), from a live volume through a
//     frozen point (see freeze.go), so the clone is the source as it was
//     when asked for.
// The new LV carries the copying tag until the copy is done: a retry after
// a crash finds it and resumes the copy (see progress.go), never hands out a
// half copy.

// sourceTag records where a volume's data came from: the source's LV
// name, which lives in the volume's VG, or for another node's snapshot
// (remote.go) its whole ID.
func (m *Manager) sourceTag(s *volume.ContentSource) string {
	if m.isRemote(s) {
		return tagSourcePrefix + s.Kind + ":" + s.ID.String()
	}
	return tagSourcePrefix + s.Kind + ":" + s.ID.LV
}

// contentSourceOf reads a volume's source back from its tag.
func (m *Manager) contentSourceOf(lv lvm.LV) *volume.ContentSource {
	kind, name, ok := strings.Cut(tagValue(lv, tagSourcePrefix), ":")
	if !ok || isSnapshot(lv) {
		return nil
	}
	if id, err := volume.ParseID(name); err == nil {
		return &volume.ContentSource{Kind: kind, ID: id}
	}
	return &volume.ContentSource{Kind: kind, ID: volume.ID{Node: m.node, VG: lv.VGName, LV: name}}
}

// resolveSource finds the source LV and fixes the request to it: the new
// volume lives in the source's VG and is at least as large as the source.
func (m *Manager) resolveSource(ctx context.Context, r lvm.Reads, req *volume.CreateRequest) (lvm.LV, error) {
	src := req.Source
	var lv lvm.LV
	var err error
	if src.Kind == volume.SourceSnapshot {
		lv, err = m.lookupSnapshot(ctx, r, src.ID)
	} else {
		lv, err = m.lookup(ctx, r, src.ID)
	}
	if err != nil {
		return lvm.LV{}, fmt.Errorf("source %s %s: %w", src.Kind, src.ID, err)
	}
	if lv.HasTag(tagDeleting) || lv.HasTag(tagPending) {
		return lvm.LV{}, fmt.Errorf("source %s %s is being created or deleted: %w", src.Kind, src.ID, volume.ErrVolumeNotFound)
	}
	if err := req.SettleSourceVG(); err != nil {
		return lvm.LV{}, err
	}
	if err := settleEncryption(req, lv); err != nil {
		return lvm.LV{}, err
	}
	if size := int64(lv.Size); req.RequiredBytes < size {
		if req.LimitBytes > 0 && req.LimitBytes < size {
			return lvm.LV{}, fmt.Errorf("source is %s, above the limit %s: %w", lvm.FormatSize(lv.Size), lvm.FormatSize(uint64(req.LimitBytes)), volume.ErrOutOfRange)
		}
		req.RequiredBytes = size
	}
	return lv, nil
}

// settleEncryption: a volume made from an encrypted source is encrypted (its
// bytes are the source's LUKS2 header and ciphertext), whatever its class
// says. Encryption asked for a plain source is refused: the new volume would
// hold the source's plaintext filesystem, not encrypted at rest as asked.
func settleEncryption(req *volume.CreateRequest, src lvm.LV) error {
	if src.HasTag(tagEncrypted) {
		req.Encrypted = true
		return nil
	}
	if req.Encrypted {
		return fmt.Errorf("%w: encryption asked, but source %s %s is not encrypted: its copy would hold its plaintext",
			volume.ErrSourceMismatch, req.Source.Kind, req.Source.ID)
	}
	return nil
}

// createFromSource carves the new LV named name from src (see above); pool
// is the thin pool's report for a thin volume. created tells whether the
// new LV's lvcreate succeeded (see CreateVolume).
func (m *Manager) createFromSource(ctx context.Context, r lvm.Reads, req volume.CreateRequest, src lvm.LV, name string, size uint64, vg lvm.VG, pool lvm.LV) (volume.Volume, bool, error) {
	tags := append(settledTags(req), m.sourceTag(req.Source))
	if src.PoolLV != "" && src.PoolLV == req.Type.ThinPool {
		// It takes no room of the pool (it shares the snapshot's
		// blocks), but lvm2 refuses it in a pool whose data is full or
		// whose metadata is at its limit, as any new thin LV: refused
		// here first (checkNewThin), from the pool's report the caller
		// read with the snapshot's.
		if err := checkNewThin(pool); err != nil {
			return volume.Volume{}, false, fmt.Errorf("volume %q: %w", req.Name, err)
		}
		// One lvcreate -an with the final tags when the snapshot is as
		// large as asked: settled in the commit that makes it (see
		// createThin), src's report read by the caller. A larger one is
		// grown after, a second step, so it is marked pending until
		// then: a retry finds it and finishes (finishCreate).
		grow := size > src.Size
		if grow {
			tags = append(tags, tagPending)
		}
		lv, err := m.lvm.CreateSnapshotOf(ctx, src, name, lvm.SnapshotOptions{Tags: tags, Inactive: true, SkipReadBack: true})
		if err != nil {
			return volume.Volume{}, false, fmt.Errorf("create volume %q from %s: %w", req.Name, src.Name, err)
		}
		klog.InfoS("Created thin volume from source", "name", req.Name, "lv", vg.Name+"/"+name, "source", src.Name)
		if !grow {
			return m.volumeOf(lv), true, nil
		}
		if err := m.lvm.ExtendLV(ctx, vg.Name, name, size); err != nil {
			return volume.Volume{}, true, fmt.Errorf("grow volume %q to %s: %w", req.Name, lvm.FormatSize(size), err)
		}
		vol, err := m.settleNew(ctx, r, vg.Name, name)
		return vol, true, err
	}
	// A copy takes the room of a new volume (a thin snapshot in the
	// source's pool above takes none: only the pool's fill was checked).
	opts := lvOptions(req.Type, vg, name, size, append(tags, tagPending, tagCopying))
	var roomErr error
	if req.Type.IsThin() {
		roomErr = m.thinRoom(pool, size, req.Type)
	} else {
		roomErr = m.checkRoom(ctx, r, vg, opts, req.Type)
	}
	if roomErr != nil {
		return volume.Volume{}, false, fmt.Errorf("volume %q: %w", req.Name, roomErr)
	}
	lv, err := m.lvm.CreateLV(ctx, opts)
	if err != nil {
		return volume.Volume{}, false, fmt.Errorf("create volume %q: %w", req.Name, err)
	}
	vol, err := m.copyIn(ctx, r, lv, src, req.Source)
	return vol, true, err
}

// copyIn fills new LV lv from src in a job (see jobs.go), then settles lv.
func (m *Manager) copyIn(ctx context.Context, r lvm.Reads, lv, src lvm.LV, from *volume.ContentSource) (volume.Volume, error) {
	key := jobKey(jobCopyIn, lv.VGName, lv.Name)
	total := int64(src.Size)
	if m.isRemote(from) {
		total = int64(lv.Size) // the source's report is its node's
	}
	j, started := m.jobs.start(key, total, runner.DataBudget(total), func(ctx context.Context, mt *meter) error {
		return m.copyData(ctx, lvm.Fresh, lv, src, from, mt) // a job: its own context, fresh reads
	})
	if err := m.awaitData(ctx, key, jobCopyIn, lv, j, started); err != nil {
		if errors.Is(err, transfer.ErrGaveUp) {
			m.dropGivenUp(ctx, lv)
		}
		return volume.Volume{}, err
	}
	return m.settleNew(ctx, r, lv.VGName, lv.Name)
}

// dropGivenUp removes a volume whose source's node could not be reached
// before any of its bytes were in (transfer.ErrGaveUp): the CO is told
// RESOURCE_EXHAUSTED and places the claim again, so nothing of this try
// may stay. The LV holds nothing of anyone's yet. A failure here is
// logged only: the CO's retry finds the LV, and its resource's deletion
// removes it as any volume's.
func (m *Manager) dropGivenUp(ctx context.Context, lv lvm.LV) {
	now, err := m.lvm.GetLV(ctx, lvm.Fresh, lv.VGName, lv.Name)
	if err == nil {
		err = m.lvm.RemoveLVOf(ctx, now)
	}
	if err != nil {
		klog.ErrorS(err, "Removing a volume whose source's node was given up", "lv", lv.VGName+"/"+lv.Name)
		return
	}
	klog.InfoS("Removed a volume whose source's node was given up", "lv", lv.VGName+"/"+lv.Name)
}

// copyData copies src into lv, then drops lv's copying tag.
func (m *Manager) copyData(ctx context.Context, r lvm.Reads, lv, src lvm.LV, from *volume.ContentSource, mt *meter) error {
	var err error
	switch {
	case m.isRemote(from):
		err = m.receive(ctx, lv, from.ID, mt)
	case from.Kind == volume.SourceSnapshot:
		if err = m.waitSnapshotReady(ctx, src); err == nil {
			err = m.copyLV(ctx, r, src, lv, src.Size, mt)
		}
	default:
		if err = m.freeze(ctx, r, src, lv.Name); err == nil {
			err = m.copyFrozen(ctx, r, lv, src.Name, src.Size, mt)
		}
	}
	if err != nil {
		return fmt.Errorf("copy %s %s into %s/%s: %w", from.Kind, from.ID, lv.VGName, lv.Name, err)
	}
	if err := m.lvm.RemoveTags(ctx, lv.VGName, lv.Name, tagCopying); err != nil {
		return err
	}
	// The job's size, which copyIn chose (the source's, or for another
	// node's snapshot the new LV's).
	klog.InfoS("Created volume from source by copy", "lv", lv.VGName+"/"+lv.Name, "source", from.Kind+" "+from.ID.String(), "bytes", mt.total.Load())
	return nil
}

// waitSnapshotReady waits for a thick snapshot still being copied.
func (m *Manager) waitSnapshotReady(ctx context.Context, snap lvm.LV) error {
	if !snap.HasTag(tagCopying) {
		return nil
	}
	key, j := m.startSnapshotCopy(snap)
	if _, err := m.jobs.await(ctx, key, j, -1); err != nil {
		return err
	}
	return ctx.Err()
}

// settleNew re-reads a new LV and finishes its creation.
func (m *Manager) settleNew(ctx context.Context, r lvm.Reads, vg, name string) (volume.Volume, error) {
	lv, err := m.lvm.GetLV(ctx, r, vg, name)
	if err != nil {
		return volume.Volume{}, err
	}
	return m.finishCreate(ctx, lv)
}

// resumeCopy redoes the copy of a volume whose creation from a source was
// interrupted (it still carries the copying tag).
func (m *Manager) resumeCopy(ctx context.Context, r lvm.Reads, lv lvm.LV) (volume.Volume, error) {
	from := m.contentSourceOf(lv)
	if from == nil {
		return volume.Volume{}, fmt.Errorf("%s/%s: copying without a recorded source", lv.VGName, lv.Name)
	}
	var src lvm.LV
	if !m.isRemote(from) {
		req := volume.CreateRequest{Source: from}
		var err error
		if src, err = m.resolveSource(ctx, r, &req); err != nil {
			return volume.Volume{}, err
		}
	}
	return m.copyIn(ctx, r, lv, src, from)
}

// sourceMatches tells whether an existing LV was made from the asked source.
func (m *Manager) sourceMatches(lv lvm.LV, from *volume.ContentSource) bool {
	got := tagValue(lv, tagSourcePrefix)
	if from == nil {
		return got == ""
	}
	return got == strings.TrimPrefix(m.sourceTag(from), tagSourcePrefix)
}
