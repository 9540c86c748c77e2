package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/transfer"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// Node-to-node transfers (package transfer): a snapshot of this node read
// for a volume restored on another node (TransferSource), and a new
// volume of this node written from another node's snapshot
// (TransferTarget).
//
// The source is a snapshot, which nothing writes, so a transfer cut and
// asked again reads the same bytes: what the receiver checked and
// checkpointed stays true. A volume in use is not served directly; a
// clone onto another node goes through a snapshot.
//
// A deletion of the snapshot stops its transfers, as it stops reads of its
// block metadata (metaReads): the transfer ends with ErrSnapshotNotFound,
// never with a stream that looks complete.

// transferSource is one transfer's open snapshot.
type transferSource struct {
	m         *Manager
	ctx       context.Context // ends when the snapshot is deleted
	done      func()          // ends the read's registration
	lv        lvm.LV
	base      string   // a catch-up's base snapshot LV, when the pool gives their delta
	f         *os.File // O_DIRECT where the device allows it
	direct    bool
	buf       []byte // aligned buffer of direct reads
	free      func()
	activated bool // activated for the transfer: deactivated at Close
}

// TransferSource opens snapshot id for a transfer to another node: ready
// (a thick snapshot's copy done), activated if it rested inactive. Its
// bytes are the LV's, ciphertext for an encrypted volume's snapshot (the
// volume restored from it opens with the same key).
//
// A base (not the zero ID) opens it for a catch-up (transfer.Request.Base):
// base must be an earlier snapshot of the same volume, and the source's
// ranges are then those that may differ from it: for thin snapshots the
// pool's delta (the reader of GetMetadataDelta), for thick ones all of it,
// as a thick snapshot is a copy and nothing records what changed.
func (m *Manager) TransferSource(ctx context.Context, id, base volume.ID) (transfer.Source, error) {
	ids := []volume.ID{id}
	if base != (volume.ID{}) {
		ids = append(ids, base)
	}
	// The source outlives this call: its registration, not ctx, ends it.
	// A deletion of the base ends it too: its delta is read as the
	// stream goes.
	rctx, done, err := m.reading(context.WithoutCancel(ctx), ids...)
	if err != nil {
		return nil, err
	}
	s, err := m.openTransferSource(ctx, rctx, id)
	if err == nil && base != (volume.ID{}) {
		err = m.setCatchUpBase(ctx, s, id, base)
	}
	if err != nil {
		if s != nil {
			s.release()
		}
		done()
		return nil, err
	}
	s.done = done
	return s, nil
}

// setCatchUpBase checks base against s's snapshot id and records it when
// the pool gives their delta.
func (m *Manager) setCatchUpBase(ctx context.Context, s *transferSource, id, base volume.ID) error {
	if base.Node != m.node {
		return fmt.Errorf("base snapshot %s is not this node's: %w", base, volume.ErrSnapshotNotFound)
	}
	b, err := m.lookupSnapshot(ctx, lvm.Fresh, base)
	if err != nil {
		return fmt.Errorf("base of a catch-up: %w", err)
	}
	err = deltaPair(base, id, b, s.lv)
	switch {
	case errors.Is(err, volume.ErrFailedPrecondition):
		// Thick snapshots of one volume: everything is sent again.
		return nil
	case err != nil:
		return fmt.Errorf("catch-up of %s from %s: %w", id, base, err)
	}
	s.base = b.Name
	return nil
}

func (m *Manager) openTransferSource(ctx, rctx context.Context, id volume.ID) (*transferSource, error) {
	lv, err := m.lookupSnapshot(ctx, lvm.Fresh, id)
	if err != nil {
		return nil, err
	}
	switch {
	case lv.HasTag(tagDeleting):
		return nil, fmt.Errorf("snapshot %s is being deleted: %w", id, volume.ErrSnapshotNotFound)
	case lv.HasTag(tagCopying):
		return nil, fmt.Errorf("%w: snapshot %s is still being copied on its node", volume.ErrOperationPending, id)
	}
	s := &transferSource{m: m, ctx: rctx, lv: lv}
	if !lv.Live() {
		if err := m.lvm.Activate(ctx, lv.VGName, lv.Name); err != nil {
			return nil, fmt.Errorf("activate transfer source %s: %w", id, err)
		}
		s.activated = true
	}
	if s.f, s.direct, err = openForCopy(devicePath(lv.VGName, lv.Name), os.O_RDONLY, true); err == nil && s.direct {
		s.buf, s.free, err = copyBuffer(true)
	}
	if err != nil {
		s.release()
		return nil, fmt.Errorf("transfer source %s: %w", id, err)
	}
	klog.V(2).InfoS("Snapshot opened for a transfer", "snapshot", id, "bytes", lv.Size, "thin", lv.PoolLV != "", "direct", s.direct)
	return s, nil
}

// Size implements transfer.Source.
func (s *transferSource) Size() int64 { return int64(s.lv.Size) }

// ReadAt implements transfer.Source: through the aligned buffer when the
// device is open with O_DIRECT (the server's buffer need not be aligned).
// Every read of a transfer of an LV starts and ends on 4 KiB (chunks,
// extents, MaxData); one that did not would fail with EINVAL, not read
// wrong bytes.
func (s *transferSource) ReadAt(b []byte, off int64) (int, error) {
	if s.ctx.Err() != nil {
		return 0, s.deleted()
	}
	if !s.direct || len(b) > len(s.buf) {
		return s.f.ReadAt(b, off)
	}
	n, err := s.f.ReadAt(s.buf[:len(b)], off)
	copy(b, s.buf[:n])
	return n, err
}

// Allocated implements transfer.Source: a thin snapshot's mapped chunks
// from its pool's metadata, or in a catch-up the chunks that differ from
// the base's; the whole of a thick one.
func (s *transferSource) Allocated(ctx context.Context, from int64, each func(volume.Range) error) error {
	if s.lv.PoolLV == "" {
		return each(volume.Range{Offset: 0, Length: s.Size()})
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(s.ctx, stop)()
	send := func(r lvm.Range) error {
		return each(volume.Range{Offset: int64(r.Offset), Length: int64(r.Length)})
	}
	var err error
	if s.base != "" {
		err = s.m.lvm.ThinDelta(ctx, s.lv.VGName, s.base, s.lv.Name, uint64(max(from, 0)), send)
	} else {
		err = s.m.lvm.ThinAllocated(ctx, s.lv.VGName, s.lv.Name, uint64(max(from, 0)), send)
	}
	if err != nil && s.ctx.Err() != nil {
		return s.deleted()
	}
	return err
}

// deleted is the error of a transfer whose snapshot was deleted under it.
func (s *transferSource) deleted() error {
	return fmt.Errorf("snapshot %s/%s was deleted during the transfer: %w", s.lv.VGName, s.lv.Name, volume.ErrSnapshotNotFound)
}

// Close implements transfer.Source.
func (s *transferSource) Close() error {
	s.release()
	s.done()
	return nil
}

// release closes the device and deactivates a snapshot the transfer
// activated. A deactivation refused because another reader has the LV
// open (a local restore, another transfer) leaves it to that reader.
func (s *transferSource) release() {
	if s.f != nil {
		_ = s.f.Close()
	}
	if s.free != nil {
		s.free()
	}
	if s.activated {
		if err := s.m.lvm.Deactivate(context.Background(), s.lv.VGName, s.lv.Name); err != nil {
			klog.V(2).InfoS("Transfer source left active", "lv", s.lv.VGName+"/"+s.lv.Name, "err", err)
		}
	}
}

// transferTarget writes a transfer into a new volume's LV, which nothing
// else writes: it is created for the transfer and not handed out before
// it is done (copying).
type transferTarget struct {
	m      *Manager
	ctx    context.Context
	device string
	f      *os.File
	// thin: zero runs are left alone (a new thin LV reads as zeroes);
	// false for thick LVs and for every catch-up, whose LV holds data.
	thin bool
	// zero is a run of zeroes not yet written (thick only): runs side by
	// side are zeroed by one command.
	zero volume.Range
}

// TransferTarget opens the new volume's LV lv for a transfer into it.
//
// Zero runs: on a thin LV nothing is written. The pool zeroes each chunk
// it maps (Carve requires zeroing pools), the LV is new, and the source
// is a snapshot: a range the transfer sends as zeroes was never written
// by this transfer or an earlier try of it (the same source gives the
// same runs), so it is unmapped and reads as zeroes, and the transfer
// maps nothing for it. On a thick LV, whose extents may hold a former
// LV's data, the runs are zeroed (the Manager's Wiper, BLKZEROOUT).
//
// A catch-up's target (catchUp) holds data already, thin or thick: its
// zero runs are always zeroed.
func (m *Manager) TransferTarget(ctx context.Context, lv lvm.LV, catchUp bool) (transfer.Target, func() error, error) {
	device := devicePath(lv.VGName, lv.Name)
	f, err := os.OpenFile(device, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("transfer target %s/%s: %w", lv.VGName, lv.Name, err)
	}
	t := &transferTarget{m: m, ctx: ctx, device: device, f: f, thin: lv.PoolLV != "" && !catchUp}
	return t, f.Close, nil
}

// WriteAt implements transfer.Target.
func (t *transferTarget) WriteAt(b []byte, off int64) (int, error) {
	if err := t.flushZero(); err != nil {
		return 0, err
	}
	return t.f.WriteAt(b, off)
}

// ReadAt implements transfer.Target.
func (t *transferTarget) ReadAt(b []byte, off int64) (int, error) { return t.f.ReadAt(b, off) }

// Zero implements transfer.Target.
func (t *transferTarget) Zero(off, n int64) error {
	if t.thin {
		return nil
	}
	if t.zero.Length > 0 && t.zero.End() == off {
		t.zero.Length += n
		return nil
	}
	if err := t.flushZero(); err != nil {
		return err
	}
	t.zero = volume.Range{Offset: off, Length: n}
	return nil
}

// Sync implements transfer.Target: the pending zero run, then a flush of
// the device.
func (t *transferTarget) Sync() error {
	if err := t.flushZero(); err != nil {
		return err
	}
	return t.f.Sync()
}

func (t *transferTarget) flushZero() error {
	if t.zero.Length == 0 {
		return nil
	}
	z := t.zero
	t.zero = volume.Range{}
	if err := t.m.wiper.Zero(t.ctx, t.device, z.Offset, z.Length); err != nil {
		return fmt.Errorf("zeroing %d bytes at %d: %w", z.Length, z.Offset, err)
	}
	return nil
}
