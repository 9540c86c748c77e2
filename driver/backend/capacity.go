package backend

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// Capacity answers from the node's NodeStorage, with the same rules as
// standalone mode (volume.CapacityOfChoice) and no LVM call. A node that
// reports nothing (no agent, or not yet) has no capacity; so has a request
// naming no node, since a volume lives on one.
func (b *Backend) Capacity(ctx context.Context, node string, vgs volume.VGChoice, t volume.Type) (volume.Capacity, error) {
	if node == "" {
		return volume.Capacity{}, nil
	}
	spaces, ratio, err := b.nodeSpace(ctx, node)
	if err != nil {
		return volume.Capacity{}, err
	}
	return volume.CapacityOfChoice(vgs, spaces, t, ratio), nil
}

// nodeSpace is what node's NodeStorage reports of its VGs (none when it
// has none yet) and its over-provisioning ratio.
func (b *Backend) nodeSpace(ctx context.Context, node string) ([]volume.VGSpace, float64, error) {
	var ns v1alpha1.NodeStorage
	err := b.Cache.Get(ctx, types.NamespacedName{Name: node}, &ns)
	if apierrors.IsNotFound(err) {
		return nil, volume.DefaultOverprovision, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("NodeStorage of %s: %w", node, err)
	}
	ratio, err := strconv.ParseFloat(ns.Status.OverprovisionRatio, 64)
	if err != nil || ratio < 1 {
		ratio = volume.DefaultOverprovision
	}
	spaces := make([]volume.VGSpace, 0, len(ns.Status.VolumeGroups))
	for _, st := range ns.Status.VolumeGroups {
		spaces = append(spaces, spaceOf(st))
	}
	return spaces, ratio, nil
}

func spaceOf(st v1alpha1.VolumeGroupStatus) volume.VGSpace {
	s := volume.VGSpace{Name: st.Name, Size: uint64(st.SizeBytes), Free: uint64(st.FreeBytes), ExtentSize: uint64(st.ExtentSize),
		MetadataSize: uint64(st.MetadataSizeBytes), MetadataFree: uint64(st.MetadataFreeBytes), Tags: st.Tags}
	for _, f := range st.PVFreeBytes {
		s.PVFree = append(s.PVFree, uint64(f))
	}
	for _, p := range st.ThinPools {
		s.Pools = append(s.Pools, volume.PoolSpace{Name: p.Name, Size: uint64(p.SizeBytes), Free: uint64(p.FreeBytes)})
	}
	for _, p := range st.Health {
		s.Health = append(s.Health, volume.Problem{Kind: volume.ParseProblemKind(p.Kind), Reason: p.Reason, Message: p.Message})
	}
	return s
}

// pickVG resolves a class's several VGs (req.VGs) to the one the volume
// goes in, from what the node last reported. The record of the pick is
// the LogicalVolume: a retry whose resource exists (have) keeps its VG
// while the choice still names it, whatever the space says now, and the
// agent refusing a stale pick for want of room drops the resource
// (dropUncarved) so that the CO's retry picks again. A volume made from
// a source goes in the source's VG, which the choice must name, unless
// the source is another node's (remote.go).
func (b *Backend) pickVG(ctx context.Context, req volume.CreateRequest, have v1alpha1.LogicalVolumeSpec) (string, error) {
	spaces, ratio, err := b.nodeSpace(ctx, req.Node)
	if err != nil {
		return "", err
	}
	switch {
	case have.NodeName == req.Node && have.VolumeGroup != "" && req.VGs.Includes(have.VolumeGroup, spaces):
		return have.VolumeGroup, nil
	case req.Source != nil && !isRemote(req):
		if !req.VGs.Includes(req.Source.ID.VG, spaces) {
			return "", fmt.Errorf("the source lives in %s, not one of %s: %w", req.Source.ID.VG, req.VGs, volume.ErrSourceMismatch)
		}
		return req.Source.ID.VG, nil
	}
	return volume.PickVG(*req.VGs, spaces, req.Type, ratio, req.RequiredBytes)
}
