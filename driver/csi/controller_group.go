package csi

import (
	"context"
	"errors"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/timestamppb"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// GroupSnapshotter is a Backend that snapshots several volumes at one
// instant (driver/lvmvol/group.go): the Controller serves the
// GroupController service only when its backend is one.
type GroupSnapshotter interface {
	CreateGroupSnapshot(ctx context.Context, name string, sources []volume.ID) (volume.GroupSnapshot, error)
	GetGroupSnapshot(ctx context.Context, r lvm.Reads, id volume.ID) (volume.GroupSnapshot, error)
	DeleteGroupSnapshot(ctx context.Context, id volume.ID) error
}

// ServesGroups tells whether the backend takes group snapshots.
func (c *Controller) ServesGroups() bool {
	_, ok := c.backend.(GroupSnapshotter)
	return ok
}

func (c *Controller) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: []*csi.GroupControllerServiceCapability{{
		Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{
			Type: csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT}},
	}}}, nil
}

// CreateVolumeGroupSnapshot snapshots the source volumes at one instant:
// their filesystems flushed and frozen together while lvm2 snapshots them.
// Thick members report ready_to_use=false until copied; the CO calls again
// (idempotent by name). The volumes must share a node and a VG.
func (c *Controller) CreateVolumeGroupSnapshot(ctx context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	if req.GetName() == "" {
		return nil, invalidArgument("group snapshot name missing")
	}
	if len(req.GetSourceVolumeIds()) == 0 {
		return nil, invalidArgument("source volume ids missing")
	}
	if err := checkSnapshotParams(req.GetParameters()); err != nil {
		return nil, err
	}
	sources := make([]volume.ID, 0, len(req.GetSourceVolumeIds()))
	for _, s := range req.GetSourceVolumeIds() {
		id, err := volume.ParseID(s)
		if err != nil {
			return nil, errors.Join(volume.ErrVolumeNotFound, err)
		}
		sources = append(sources, id)
	}
	g, err := c.backend.(GroupSnapshotter).CreateGroupSnapshot(ctx, req.GetName(), sources)
	if err != nil {
		return nil, err
	}
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: csiGroupSnapshot(g)}, nil
}

// GetVolumeGroupSnapshot reports a group snapshot; snapshot_ids, when
// given, must be its members (INVALID_ARGUMENT otherwise).
func (c *Controller) GetVolumeGroupSnapshot(ctx context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	if req.GetGroupSnapshotId() == "" {
		return nil, invalidArgument("group snapshot id missing")
	}
	id, err := volume.ParseID(req.GetGroupSnapshotId())
	if err != nil {
		return nil, errors.Join(volume.ErrSnapshotNotFound, err)
	}
	g, err := c.backend.(GroupSnapshotter).GetGroupSnapshot(ctx, lvm.Cached, id) // a query: see getVolume
	if err != nil {
		return nil, err
	}
	if err := checkMembers(g, req.GetSnapshotIds()); err != nil {
		return nil, err
	}
	return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: csiGroupSnapshot(g)}, nil
}

// DeleteVolumeGroupSnapshot deletes a group snapshot and its members; one
// that is gone is deleted already. snapshot_ids, when given, must be its
// members (INVALID_ARGUMENT otherwise, and nothing is deleted).
func (c *Controller) DeleteVolumeGroupSnapshot(ctx context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	if req.GetGroupSnapshotId() == "" {
		return nil, invalidArgument("group snapshot id missing")
	}
	id, err := volume.ParseID(req.GetGroupSnapshotId())
	if err != nil {
		return &csi.DeleteVolumeGroupSnapshotResponse{}, nil // not an ID of ours: nothing to delete
	}
	gs := c.backend.(GroupSnapshotter)
	if ids := req.GetSnapshotIds(); len(ids) > 0 {
		g, err := gs.GetGroupSnapshot(ctx, lvm.Fresh, id)
		if errors.Is(err, volume.ErrSnapshotNotFound) {
			return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
		}
		if err != nil {
			return nil, err
		}
		if err := checkMembers(g, ids); err != nil {
			return nil, err
		}
	}
	if err := gs.DeleteGroupSnapshot(ctx, id); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
}

// checkMembers: the snapshot IDs a CO sends, if any, are exactly g's.
func checkMembers(g volume.GroupSnapshot, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	have := make([]string, 0, len(g.Snapshots))
	for _, s := range g.Snapshots {
		have = append(have, s.ID.String())
	}
	want := slices.Clone(ids)
	slices.Sort(have)
	slices.Sort(want)
	if !slices.Equal(have, slices.Compact(want)) {
		return invalidArgument("group snapshot %s has snapshots %v, not %v", g.ID, have, ids)
	}
	return nil
}

func csiGroupSnapshot(g volume.GroupSnapshot) *csi.VolumeGroupSnapshot {
	out := &csi.VolumeGroupSnapshot{GroupSnapshotId: g.ID.String(), ReadyToUse: g.Ready}
	for _, s := range g.Snapshots {
		out.Snapshots = append(out.Snapshots, csiSnapshot(s))
	}
	if !g.CreatedAt.IsZero() {
		out.CreationTime = timestamppb.New(g.CreatedAt)
	}
	return out
}
