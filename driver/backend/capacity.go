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
// standalone mode (volume.CapacityOf) and no LVM call. A node that reports
// nothing (no agent, or not yet) has no capacity; so has a request naming
// no node, since a volume lives on one.
func (b *Backend) Capacity(ctx context.Context, node, vg string, t volume.Type) (volume.Capacity, error) {
	if node == "" {
		return volume.Capacity{}, nil
	}
	var ns v1alpha1.NodeStorage
	err := b.Cache.Get(ctx, types.NamespacedName{Name: node}, &ns)
	if apierrors.IsNotFound(err) {
		return volume.Capacity{}, nil
	}
	if err != nil {
		return volume.Capacity{}, fmt.Errorf("NodeStorage of %s: %w", node, err)
	}
	ratio, err := strconv.ParseFloat(ns.Status.OverprovisionRatio, 64)
	if err != nil || ratio < 1 {
		ratio = volume.DefaultOverprovision
	}
	for _, st := range ns.Status.VolumeGroups {
		if st.Name == vg {
			return volume.CapacityOf(spaceOf(st), t, ratio), nil
		}
	}
	return volume.Capacity{}, nil
}

func spaceOf(st v1alpha1.VolumeGroupStatus) volume.VGSpace {
	s := volume.VGSpace{Name: st.Name, Size: uint64(st.SizeBytes), Free: uint64(st.FreeBytes), ExtentSize: uint64(st.ExtentSize),
		MetadataSize: uint64(st.MetadataSizeBytes), MetadataFree: uint64(st.MetadataFreeBytes)}
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
