package lvmvol

import (
	"context"
	"errors"
	"fmt"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// Block metadata of snapshots (changed-block tracking, the CSI
// SnapshotMetadata service): which byte ranges of a snapshot hold data,
// and which differ between two snapshots of one volume.
//
// What can be told, by kind of snapshot:
//   - A thin snapshot: its pool's metadata maps each of its chunks, so
//     both are known exactly, to the pool's chunk (lvm.ThinAllocated,
//     lvm.ThinDelta: every byte that holds data, or differs, is reported;
//     a range may cover at most one chunk more on either side of what was
//     written).
//   - A thick snapshot is a full copy into an LV of its own (snapshot.go):
//     every byte of it is allocated, so its allocated range is the whole
//     volume. Which bytes changed between two copies is recorded nowhere:
//     their delta is ErrFailedPrecondition, the CSI spec's answer when
//     changed-block tracking is not enabled (the caller takes a full
//     backup instead).
//   - A snapshot of an encrypted volume holds LUKS2: its LV's ranges are
//     of the ciphertext, shifted by the LUKS2 header from the bytes the
//     volume's user reads, so they are not served (ErrFailedPrecondition).
//   - A thick snapshot whose copy still runs is not served until it is
//     ready (ErrFailedPrecondition), as it could not be restored either.
//
// A read streams: ranges go to the caller's sink as the pool's metadata is
// read (thin_dump and thin_delta's XML is parsed as it comes, see
// lvm/thinxml.go), so memory does not grow with the volume; a slow sink
// holds the tool's output back, under the tool's data deadline.
//
// A snapshot deleted while its ranges are read: DeleteSnapshot stops the
// reads of that snapshot (metaReads, apart from this logic) before it
// removes the LV, and the read ends with ErrSnapshotNotFound saying so,
// never with a stream that looks complete. The lvm layer releases the
// pool's metadata snapshot on every return, a cancelled read's included.
// Deletions by hand or by another process are not seen: the read then
// ends as it would have, from the metadata snapshot it reserved before,
// which still held the snapshot's mappings as they were.
//
// Crash safety: a read changes nothing of a volume or snapshot; the only
// state it leaves when carve is killed mid-read is the pool's metadata
// snapshot, reserved, which the next read of the pool's VG releases and
// reserves afresh (lvm.Client.withMetadataSnap), and carve's start
// releases (ReleaseMetadataSnapshots); and the pool it may have activated,
// which stays active as any pool of an active thin LV does.

// SnapshotAllocated sends out the ranges of snapshot id that hold data,
// those ending after from, with the snapshot's size first.
func (m *Manager) SnapshotAllocated(ctx context.Context, id volume.ID, from int64, out volume.BlockSink) error {
	ctx, done, err := m.reading(ctx, id)
	if err != nil {
		return err
	}
	defer done()
	lv, err := m.blocksOf(ctx, lvm.Fresh, id)
	if err != nil {
		return err
	}
	size := int64(lv.Size)
	if err := out.Start(size); err != nil {
		return err
	}
	if lv.PoolLV == "" {
		// A full copy: every byte allocated.
		if from < size {
			return out.Range(volume.Range{Offset: 0, Length: size})
		}
		return nil
	}
	err = m.lvm.ThinAllocated(ctx, id.VG, id.LV, uint64(max(from, 0)), sendTo(ctx, out))
	return readErr(ctx, err)
}

// SnapshotDelta sends out the ranges that differ between snapshots base
// and target of one volume, those ending after from, with target's size
// first.
func (m *Manager) SnapshotDelta(ctx context.Context, base, target volume.ID, from int64, out volume.BlockSink) error {
	ctx, done, err := m.reading(ctx, base, target)
	if err != nil {
		return err
	}
	defer done()
	b, err := m.blocksOf(ctx, lvm.Fresh, base)
	if err != nil {
		return err
	}
	t, err := m.blocksOf(ctx, lvm.Fresh, target)
	if err != nil {
		return err
	}
	if err := deltaPair(base, target, b, t); err != nil {
		return err
	}
	if err := out.Start(int64(t.Size)); err != nil {
		return err
	}
	err = m.lvm.ThinDelta(ctx, target.VG, b.Name, t.Name, uint64(max(from, 0)), sendTo(ctx, out))
	return readErr(ctx, err)
}

// deltaPair checks that snapshots b and t can have a delta: the same
// volume's, base not newer than target, both thin in one pool.
func deltaPair(base, target volume.ID, b, t lvm.LV) error {
	switch {
	case base.VG != target.VG:
		return fmt.Errorf("%w: snapshots %s and %s are in different volume groups: not snapshots of one volume",
			volume.ErrInvalidArgument, base, target)
	case tagValue(b, tagSourcePrefix) != tagValue(t, tagSourcePrefix):
		return fmt.Errorf("%w: snapshot %s is of volume %s, %s of %s: a delta is between two snapshots of one volume",
			volume.ErrInvalidArgument, base, tagValue(b, tagSourcePrefix), target, tagValue(t, tagSourcePrefix))
	case createdAt(b).After(createdAt(t)):
		return fmt.Errorf("%w: base snapshot %s (made %s) is newer than target %s (made %s)",
			volume.ErrInvalidArgument, base, createdAt(b).Format("2006-01-02T15:04:05Z"), target, createdAt(t).Format("2006-01-02T15:04:05Z"))
	case b.PoolLV == "" || t.PoolLV == "":
		return fmt.Errorf("%w: changed-block tracking is not enabled for thick snapshots (%s, %s): each is a full copy, and which blocks changed between two is recorded nowhere; take a full backup",
			volume.ErrFailedPrecondition, base, target)
	case b.PoolLV != t.PoolLV:
		return fmt.Errorf("%w: snapshots %s and %s are in different thin pools (%s, %s)",
			volume.ErrInvalidArgument, base, target, b.PoolLV, t.PoolLV)
	}
	return nil
}

// blocksOf finds snapshot id for a read of its block metadata, refusing
// those whose metadata is not served.
func (m *Manager) blocksOf(ctx context.Context, r lvm.Reads, id volume.ID) (lvm.LV, error) {
	lv, err := m.lookupSnapshot(ctx, r, id)
	if err != nil {
		return lvm.LV{}, err
	}
	switch {
	case lv.HasTag(tagDeleting):
		return lvm.LV{}, fmt.Errorf("snapshot %s is being deleted: %w", id, volume.ErrSnapshotNotFound)
	case lv.HasTag(tagEncrypted):
		return lvm.LV{}, fmt.Errorf("%w: snapshot %s is of an encrypted volume: its LV holds LUKS2 ciphertext, whose ranges are not the volume's; block metadata is not served for it",
			volume.ErrFailedPrecondition, id)
	case lv.HasTag(tagCopying):
		return lvm.LV{}, fmt.Errorf("%w: snapshot %s is not ready: its copy is still running", volume.ErrFailedPrecondition, id)
	}
	return lv, nil
}

// reading registers a read of snapshots ids: the context it returns ends
// when one of them is deleted (stopReads); done ends the registration.
func (m *Manager) reading(ctx context.Context, ids ...volume.ID) (context.Context, func(), error) {
	var dones []func()
	done := func() {
		for _, d := range dones {
			d()
		}
	}
	for _, id := range ids {
		var d func()
		var err error
		if ctx, d, err = m.metaReads.Read(ctx, readKey(id)); err != nil {
			done()
			return nil, nil, err
		}
		dones = append(dones, d)
	}
	return ctx, done, nil
}

// readKey is a snapshot's key in metaReads.
func readKey(id volume.ID) string { return id.VG + "/" + id.LV }

// sendTo hands lvm's ranges on to out while ctx lasts. A deletion ends
// ctx while out may be blocked on a slow client, and the tool's output
// already read stays in the parser's and the pipe's buffers: without the
// check, the ranges buffered would still go out after the deletion, up to
// all of them (measured in the VM: 6000 of 6000), and only the stream's
// status would tell.
func sendTo(ctx context.Context, out volume.BlockSink) func(lvm.Range) error {
	return func(r lvm.Range) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return out.Range(volume.Range{Offset: int64(r.Offset), Length: int64(r.Length)})
	}
}

// readErr is the error of a read that ended with err: the deletion of a
// snapshot read when that stopped it (err is then the tool's
// cancellation, which would not say why).
func readErr(ctx context.Context, err error) error {
	var stopped *stoppedRead
	if err != nil && errors.As(context.Cause(ctx), &stopped) {
		return stopped
	}
	return err
}

// stoppedRead is the cause a snapshot's deletion stops its reads with.
type stoppedRead struct{ id volume.ID }

func (s *stoppedRead) Error() string {
	return fmt.Sprintf("snapshot %s is being deleted: its block metadata read was stopped, any ranges sent are incomplete", s.id)
}

func (s *stoppedRead) Unwrap() error { return volume.ErrSnapshotNotFound }

// stopReads stops the block metadata reads of snapshot lv, and refuses
// new ones, until resume: its deletion is under way.
func (m *Manager) stopReads(lv lvm.LV) (resume func()) {
	id := volume.ID{Node: m.node, VG: lv.VGName, LV: lv.Name}
	return m.metaReads.Stop(readKey(id), &stoppedRead{id: id})
}
