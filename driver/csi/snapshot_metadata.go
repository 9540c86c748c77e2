package csi

import (
	"context"
	"errors"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/volume"
)

// The SnapshotMetadata service (changed-block tracking): the byte ranges
// of a snapshot that hold data (GetMetadataAllocated), and those that
// differ between two snapshots of one volume (GetMetadataDelta), streamed
// as the node reads them from LVM (lvmvol's blocks.go says what each
// kind of snapshot can tell). It is served where the snapshots' LVs are:
// by carve standalone and carve node, never by carve controller.
//
// The stream's format, per the CSI spec:
//   - VARIABLE_LENGTH tuples: a thin pool maps chunks (64 KiB and up), and
//     a run of written chunks is one tuple of its length, not one tuple
//     per chunk (a fully written 1 GiB volume is one tuple, not 16384 of
//     64 KiB); a thick snapshot's allocated range is one tuple for the
//     whole volume. FIXED_LENGTH would multiply the messages by the run
//     lengths and tell the client nothing more.
//   - starting_offset S: no tuple ends at or before S, and a tuple that
//     starts before S is cut to start at S (its bytes before S were asked
//     for no more). S negative or past the snapshot's size is
//     OUT_OF_RANGE, as the spec says; S equal to the size is an empty
//     answer (a resumed stream that had everything).
//   - max_results: at most that many tuples per message; 0 or more than
//     maxTuplesPerMessage is maxTuplesPerMessage (the spec lets the plugin
//     send fewer), so one message is small whatever the client asks.
//   - Every stream that succeeds sends at least one message: one with no
//     tuple when nothing is allocated or changed, since the volume's
//     capacity is only told in messages.
//   - An error ends the stream: what was sent before it stands (the
//     client may resume from the end of the last tuple it got).

// maxTuplesPerMessage bounds the tuples of one message: about 20 bytes
// each on the wire.
const maxTuplesPerMessage = 1024

// SnapshotBlocks reads snapshots' block metadata on this node
// (lvmvol.Manager).
type SnapshotBlocks interface {
	// SnapshotAllocated sends out the ranges of snapshot id that hold
	// data and end after from; SnapshotDelta those that differ between
	// base and target. Both call out.Start first, with the snapshot's
	// (the target's) size.
	SnapshotAllocated(ctx context.Context, id volume.ID, from int64, out volume.BlockSink) error
	SnapshotDelta(ctx context.Context, base, target volume.ID, from int64, out volume.BlockSink) error
}

// SnapshotMetadata is the CSI SnapshotMetadata service.
type SnapshotMetadata struct {
	csi.UnimplementedSnapshotMetadataServer
	blocks SnapshotBlocks
}

// NewSnapshotMetadata serves snapshots' block metadata from b.
func NewSnapshotMetadata(b SnapshotBlocks) *SnapshotMetadata { return &SnapshotMetadata{blocks: b} }

func (s *SnapshotMetadata) GetMetadataAllocated(req *csi.GetMetadataAllocatedRequest, stream csi.SnapshotMetadata_GetMetadataAllocatedServer) error {
	id, err := metadataSnapshotID("snapshot_id", req.GetSnapshotId())
	if err != nil {
		return err
	}
	send := func(capacity int64, blocks []*csi.BlockMetadata) error {
		return stream.Send(&csi.GetMetadataAllocatedResponse{BlockMetadataType: csi.BlockMetadataType_VARIABLE_LENGTH,
			VolumeCapacityBytes: capacity, BlockMetadata: blocks})
	}
	return streamBlocks(req.GetStartingOffset(), req.GetMaxResults(), send, func(p *pager) error {
		return s.blocks.SnapshotAllocated(stream.Context(), id, req.GetStartingOffset(), p)
	})
}

func (s *SnapshotMetadata) GetMetadataDelta(req *csi.GetMetadataDeltaRequest, stream csi.SnapshotMetadata_GetMetadataDeltaServer) error {
	base, err := metadataSnapshotID("base_snapshot_id", req.GetBaseSnapshotId())
	if err != nil {
		return err
	}
	target, err := metadataSnapshotID("target_snapshot_id", req.GetTargetSnapshotId())
	if err != nil {
		return err
	}
	send := func(capacity int64, blocks []*csi.BlockMetadata) error {
		return stream.Send(&csi.GetMetadataDeltaResponse{BlockMetadataType: csi.BlockMetadataType_VARIABLE_LENGTH,
			VolumeCapacityBytes: capacity, BlockMetadata: blocks})
	}
	return streamBlocks(req.GetStartingOffset(), req.GetMaxResults(), send, func(p *pager) error {
		return s.blocks.SnapshotDelta(stream.Context(), base, target, req.GetStartingOffset(), p)
	})
}

// streamBlocks checks a request's paging, has read write the ranges to a
// pager over send, and ends the stream.
func streamBlocks(from int64, maxResults int32, send func(int64, []*csi.BlockMetadata) error, read func(*pager) error) error {
	p, err := newPager(from, maxResults, send)
	if err != nil {
		return err
	}
	if err := read(p); err != nil {
		return err
	}
	return p.finish()
}

// metadataSnapshotID reads a snapshot ID of a request's field: missing is
// INVALID_ARGUMENT; one Carve cannot have made is NOT_FOUND (the spec's
// "invalid snapshot_id"), as for GetSnapshot.
func metadataSnapshotID(field, s string) (volume.ID, error) {
	if s == "" {
		return volume.ID{}, invalidArgument("%s missing", field)
	}
	id, err := volume.ParseID(s)
	if err != nil {
		return volume.ID{}, errors.Join(fmt.Errorf("%s: %w", field, volume.ErrSnapshotNotFound), err)
	}
	return id, nil
}

// pager turns a backend's ranges into the stream's messages (see the
// format above); it is the volume.BlockSink the backend writes to.
type pager struct {
	from, capacity int64
	max            int
	started, sent  bool
	end            int64 // the end of the last tuple taken (from, before any)
	buf            []*csi.BlockMetadata
	send           func(capacity int64, blocks []*csi.BlockMetadata) error
}

// newPager checks a request's starting_offset and max_results.
func newPager(from int64, maxResults int32, send func(int64, []*csi.BlockMetadata) error) (*pager, error) {
	if from < 0 {
		return nil, fmt.Errorf("%w: starting_offset %d is negative", volume.ErrOffsetOutOfRange, from)
	}
	if maxResults < 0 {
		return nil, invalidArgument("max_results %d is negative", maxResults)
	}
	n := int(maxResults)
	if n == 0 || n > maxTuplesPerMessage {
		n = maxTuplesPerMessage
	}
	return &pager{from: from, max: n, end: from, send: send}, nil
}

// Start takes the snapshot's size, against which starting_offset is
// checked.
func (p *pager) Start(capacity int64) error {
	if p.started {
		return errors.New("block metadata: started twice")
	}
	if p.from > capacity {
		return fmt.Errorf("%w: starting_offset %d is past the snapshot's size, %d bytes", volume.ErrOffsetOutOfRange, p.from, capacity)
	}
	p.started, p.capacity = true, capacity
	return nil
}

// Range takes the next range, cut to start at starting_offset, and sends
// a message when it has max of them. A range out of order, empty or past
// the snapshot's size is a bug of the backend: the stream ends
// (INTERNAL) rather than break the spec's ordering.
func (p *pager) Range(r volume.Range) error {
	if !p.started {
		return errors.New("block metadata: a range before the snapshot's size")
	}
	if r.Offset < p.from {
		r.Length -= p.from - r.Offset
		r.Offset = p.from
	}
	if r.Length <= 0 || r.Offset < p.end || r.End() > p.capacity || r.End() < r.Offset {
		return fmt.Errorf("block metadata: range [%d, +%d) out of order after %d, or past the size %d", r.Offset, r.Length, p.end, p.capacity)
	}
	p.end = r.End()
	p.buf = append(p.buf, &csi.BlockMetadata{ByteOffset: r.Offset, SizeBytes: r.Length})
	if len(p.buf) >= p.max {
		return p.flush()
	}
	return nil
}

func (p *pager) flush() error {
	err := p.send(p.capacity, p.buf)
	p.buf, p.sent = nil, true
	return err
}

// finish sends what is left, or the one message of an empty answer.
func (p *pager) finish() error {
	if !p.started {
		return errors.New("block metadata: the read ended without the snapshot's size")
	}
	if len(p.buf) > 0 || !p.sent {
		return p.flush()
	}
	return nil
}
