package lvmvol

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/metrics"
	"carve.dev/carve/driver/transfer"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// A volume restored from another node's snapshot.
//
// The controller places a restore where the scheduler put the claim's
// pod; when that is not the snapshot's node, this node carves a new LV of
// the asked type in one of its own VGs and receives the snapshot's bytes
// from the snapshot's node (Remote: the node agent's transfer client,
// driver/transfer). It is a copy as a local one is (source.go): the new LV
// carries the pending and copying tags until the bytes are in, and
// records how far they are (carve.dev/copied=NODE/VG/LV:N, progress.go),
// so a retry after a crash, a restart or a cut connection asks the
// snapshot's node again from there. The record is written only after the
// transfer has flushed the segment, read it back and matched its digest
// with the sender's; the snapshot never changes, so the bytes resent are
// the same.

// Remote receives a snapshot of another node into a target on this one.
type Remote interface {
	// Receive writes the snapshot source into t from byte from on,
	// telling checkpoint each checked segment; forLV names the volume
	// it fills (the LogicalVolume, whose name is its LV's), which the
	// source's node checks before it sends anything. A base (not the
	// zero ID) asks for a catch-up: t holds base, an earlier snapshot of
	// the same volume, and only what changed since is sent
	// (transfer.Request.Base).
	Receive(ctx context.Context, source, base volume.ID, forLV string, t transfer.Target, size, from int64, checkpoint transfer.Checkpoint) error
}

// isRemote tells whether s is another node's.
func (m *Manager) isRemote(s *volume.ContentSource) bool { return s != nil && s.ID.Node != m.node }

// settleRemoteSource checks a request whose source is another node's and
// fixes its VG: one of this node's (the request's, else the default),
// not the source's. Its size and encryption are the controller's to set,
// which knows the snapshot.
func (m *Manager) settleRemoteSource(req *volume.CreateRequest) error {
	src := req.Source
	switch {
	case src.Kind != volume.SourceSnapshot:
		return fmt.Errorf("%w: volume %s is on node %s: a volume is cloned only on its own node; take a snapshot of it and restore that",
			volume.ErrVolumeNotFound, src.ID, src.ID.Node)
	case m.remote == nil:
		return fmt.Errorf("%w: snapshot %s is on node %s, and this node receives no transfers from other nodes",
			volume.ErrSnapshotNotFound, src.ID, src.ID.Node)
	}
	if req.VG == "" {
		req.VG = m.vgs[0]
	}
	return nil
}

// receive fills lv with the snapshot source of another node (see above),
// from its last record on, and drops the records once it is all in.
func (m *Manager) receive(ctx context.Context, lv lvm.LV, source volume.ID, mt *meter) error {
	if m.remote == nil {
		return fmt.Errorf("%w: snapshot %s is on node %s, and this node receives no transfers", volume.ErrSnapshotNotFound, source, source.Node)
	}
	if !lv.Live() {
		if err := m.lvm.Activate(ctx, lv.VGName, lv.Name); err != nil {
			return fmt.Errorf("activate transfer target %s/%s: %w", lv.VGName, lv.Name, err)
		}
	}
	start := time.Now()
	klog.InfoS("Receiving a snapshot from another node", "lv", lv.VGName+"/"+lv.Name, "source", source)
	from, err := m.receiveInto(ctx, lv, source, volume.ID{}, mt)
	if err != nil {
		return err
	}
	metrics.Copied(int64(lv.Size)-from, time.Since(start))
	return nil
}

// receiveInto receives source into lv, active, from its last record on
// (a full copy, or a catch-up from base when base is not the zero ID),
// and drops the records once it is all in; from is where it started.
func (m *Manager) receiveInto(ctx context.Context, lv lvm.LV, source, base volume.ID, mt *meter) (from int64, err error) {
	t, closeTarget, err := m.TransferTarget(ctx, lv, base != (volume.ID{}))
	if err != nil {
		return 0, err
	}
	defer func() { _ = closeTarget() }()
	p := m.progressOf(lv, tagCopiedPrefix, source.String())
	size := int64(lv.Size)
	from = p.resume(size, sectorSize)
	mt.set(from)
	err = m.remote.Receive(ctx, source, base, lv.Name, t, size, from, func(done int64) error {
		mt.set(done)
		// The transfer flushed and checked the bytes before done.
		return p.checkpoint(ctx, done, func() error { return nil })
	})
	if err != nil {
		return from, err
	}
	p.clear(ctx)
	return from, nil
}
