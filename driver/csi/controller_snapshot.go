package csi

import (
	"context"
	"errors"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/timestamppb"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// CreateSnapshot snapshots a volume. Thin snapshots are ready at once;
// thick ones report ready_to_use=false until their data is copied, and the
// CO calls again until they are (each call is idempotent).
func (c *Controller) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	if req.GetName() == "" {
		return nil, invalidArgument("snapshot name missing")
	}
	if req.GetSourceVolumeId() == "" {
		return nil, invalidArgument("source volume id missing")
	}
	if err := checkSnapshotParams(req.GetParameters()); err != nil {
		return nil, err
	}
	src, err := volume.ParseID(req.GetSourceVolumeId())
	if err != nil {
		return nil, err
	}
	requester, err := volume.RequesterFrom(req.GetParameters(), volume.RequesterSnapshot)
	if err != nil {
		return nil, invalidArgument("%v", err)
	}
	snap, err := c.backend.CreateSnapshot(volume.WithRequester(ctx, requester), req.GetName(), src)
	if err != nil {
		return nil, err
	}
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
}

// checkSnapshotParams: VolumeSnapshotClass parameters. Carve has none of
// its own yet; unknown ones are refused, as for StorageClasses.
func checkSnapshotParams(params map[string]string) error {
	for k := range params {
		if !strings.HasPrefix(k, volume.COParamPrefix) {
			return invalidArgument("unknown snapshot parameter %q", k)
		}
	}
	return nil
}

func csiSnapshot(s volume.Snapshot) *csi.Snapshot {
	out := &csi.Snapshot{
		SnapshotId:     s.ID.String(),
		SourceVolumeId: s.Source.String(),
		SizeBytes:      s.SizeBytes,
		ReadyToUse:     s.Ready,
	}
	if !s.CreatedAt.IsZero() {
		out.CreationTime = timestamppb.New(s.CreatedAt)
	}
	if s.Group != (volume.ID{}) {
		out.GroupSnapshotId = s.Group.String()
	}
	return out
}

func (c *Controller) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, invalidArgument("snapshot id missing")
	}
	id, err := volume.ParseID(req.GetSnapshotId())
	if err != nil {
		return &csi.DeleteSnapshotResponse{}, nil // not an ID of ours: nothing to delete
	}
	if err := c.backend.DeleteSnapshot(ctx, id); err != nil {
		return nil, err
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

func (c *Controller) GetSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	if req.GetSnapshotId() == "" {
		return nil, invalidArgument("snapshot id missing")
	}
	id, err := volume.ParseID(req.GetSnapshotId())
	if err != nil {
		return nil, errors.Join(volume.ErrSnapshotNotFound, err)
	}
	snap, err := c.backend.GetSnapshot(ctx, lvm.Cached, id) // a query: see getVolume
	if err != nil {
		return nil, err
	}
	return &csi.GetSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
}

// ListSnapshots filters by snapshot ID or source volume ID and pages in ID
// order like ListVolumes.
func (c *Controller) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, invalidArgument("max_entries %d is negative", req.GetMaxEntries())
	}
	all, err := c.backend.ListSnapshots(ctx, lvm.Cached) // a query: see getVolume
	if err != nil {
		return nil, err
	}
	var snaps []volume.Snapshot
	for _, s := range all {
		if (req.GetSnapshotId() == "" || s.ID.String() == req.GetSnapshotId()) &&
			(req.GetSourceVolumeId() == "" || s.Source.String() == req.GetSourceVolumeId()) {
			snaps = append(snaps, s)
		}
	}
	start, err := pageStart(req.GetStartingToken(), len(snaps))
	if err != nil {
		return nil, err
	}
	end := pageEnd(start, int(req.GetMaxEntries()), len(snaps))
	resp := &csi.ListSnapshotsResponse{NextToken: nextToken(end, len(snaps))}
	for _, s := range snaps[start:end] {
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(s)})
	}
	return resp, nil
}
