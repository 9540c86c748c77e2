// Package snapmeta is a small client of the CSI SnapshotMetadata service,
// the gRPC the kubernetes-csi external-snapshot-metadata sidecar speaks to
// a driver on behalf of backup applications: it reads a stream to its
// end, holds every message to the spec's rules (one block metadata type
// and one capacity per stream, at most max_results tuples per message,
// tuples in increasing order without overlap, none ending at or before
// starting_offset, every size positive), and resumes a stream cut by the
// transport from the end of the last tuple it got, as the spec lets a
// client. The VM suites and the unit tests read Carve's service with it.
package snapmeta

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Range is a tuple of the stream: Length bytes from Offset.
type Range struct {
	Offset, Length int64
}

// End is the offset just past r.
func (r Range) End() int64 { return r.Offset + r.Length }

// Result is what a stream told.
type Result struct {
	Type     csi.BlockMetadataType
	Capacity int64
	Ranges   []Range
	// Messages counts the messages received, Sizes their tuples each.
	Messages int
	Sizes    []int
	// next: the end of the last tuple received, where a resumed stream
	// starts.
	next int64
}

// Bytes is the total length of the ranges.
func (r Result) Bytes() int64 {
	var n int64
	for _, x := range r.Ranges {
		n += x.Length
	}
	return n
}

// ErrProtocol marks a stream that broke the spec's rules.
var ErrProtocol = errors.New("snapshot metadata stream breaks the CSI spec")

// Options of a read.
type Options struct {
	From       int64
	MaxResults int32
	// Resumes is how many times a stream cut by the transport
	// (UNAVAILABLE, or the stream's end without a status) is asked again
	// from where it stopped.
	Resumes int
	// Each, when set, is called with each message's tuples as they come
	// (for reads in bounded memory: Result.Ranges stays empty then).
	Each func([]Range) error
}

// message is what both responses carry.
type message interface {
	GetBlockMetadataType() csi.BlockMetadataType
	GetVolumeCapacityBytes() int64
	GetBlockMetadata() []*csi.BlockMetadata
}

// Allocated reads GetMetadataAllocated of snapshot id.
func Allocated(ctx context.Context, c csi.SnapshotMetadataClient, id string, o Options) (Result, error) {
	return read(ctx, o, func(ctx context.Context, from int64) (func() (message, error), error) {
		s, err := c.GetMetadataAllocated(ctx, &csi.GetMetadataAllocatedRequest{SnapshotId: id, StartingOffset: from, MaxResults: o.MaxResults})
		if err != nil {
			return nil, err
		}
		return func() (message, error) { return s.Recv() }, nil
	})
}

// Delta reads GetMetadataDelta of base and target.
func Delta(ctx context.Context, c csi.SnapshotMetadataClient, base, target string, o Options) (Result, error) {
	return read(ctx, o, func(ctx context.Context, from int64) (func() (message, error), error) {
		s, err := c.GetMetadataDelta(ctx, &csi.GetMetadataDeltaRequest{BaseSnapshotId: base, TargetSnapshotId: target,
			StartingOffset: from, MaxResults: o.MaxResults})
		if err != nil {
			return nil, err
		}
		return func() (message, error) { return s.Recv() }, nil
	})
}

func read(ctx context.Context, o Options, open func(context.Context, int64) (func() (message, error), error)) (Result, error) {
	var res Result
	from := o.From
	for attempt := 0; ; attempt++ {
		err := readOnce(ctx, o, from, &res, open)
		if err == nil || attempt >= o.Resumes || status.Code(err) != codes.Unavailable {
			return res, err
		}
		from = max(from, res.next)
	}
}

// readOnce reads one stream from from into res, checking each message.
func readOnce(ctx context.Context, o Options, from int64, res *Result, open func(context.Context, int64) (func() (message, error), error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recv, err := open(ctx, from)
	if err != nil {
		return err
	}
	end := from // no tuple may end at or before it, or start before the last's end
	first := true
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if res.Messages == 0 {
			res.Type, res.Capacity = m.GetBlockMetadataType(), m.GetVolumeCapacityBytes()
		}
		res.Messages++
		res.Sizes = append(res.Sizes, len(m.GetBlockMetadata()))
		switch {
		case m.GetBlockMetadataType() != res.Type || m.GetVolumeCapacityBytes() != res.Capacity:
			return fmt.Errorf("%w: message %d says %v of %d bytes, the first %v of %d", ErrProtocol, res.Messages,
				m.GetBlockMetadataType(), m.GetVolumeCapacityBytes(), res.Type, res.Capacity)
		case res.Type != csi.BlockMetadataType_FIXED_LENGTH && res.Type != csi.BlockMetadataType_VARIABLE_LENGTH:
			return fmt.Errorf("%w: block metadata type %v", ErrProtocol, res.Type)
		case o.MaxResults > 0 && len(m.GetBlockMetadata()) > int(o.MaxResults):
			return fmt.Errorf("%w: message %d has %d tuples, max_results %d", ErrProtocol, res.Messages, len(m.GetBlockMetadata()), o.MaxResults)
		}
		var batch []Range
		for _, b := range m.GetBlockMetadata() {
			r := Range{Offset: b.GetByteOffset(), Length: b.GetSizeBytes()}
			switch {
			case r.Length <= 0 || r.Offset < 0:
				return fmt.Errorf("%w: tuple %+v", ErrProtocol, r)
			case first && r.End() <= from:
				return fmt.Errorf("%w: first tuple %+v ends at or before starting_offset %d", ErrProtocol, r, from)
			case !first && r.Offset < end:
				return fmt.Errorf("%w: tuple %+v starts before the end of the one before it, %d", ErrProtocol, r, end)
			case r.End() > res.Capacity:
				return fmt.Errorf("%w: tuple %+v ends past the capacity %d", ErrProtocol, r, res.Capacity)
			case res.Type == csi.BlockMetadataType_FIXED_LENGTH && len(res.Ranges) > 0 && r.Length != res.Ranges[0].Length:
				return fmt.Errorf("%w: FIXED_LENGTH tuple %+v, the first was %d bytes", ErrProtocol, r, res.Ranges[0].Length)
			}
			first, end = false, r.End()
			batch = append(batch, r)
		}
		res.next = end
		if o.Each != nil {
			if err := o.Each(batch); err != nil {
				return err
			}
			continue
		}
		res.Ranges = append(res.Ranges, batch...)
	}
}
