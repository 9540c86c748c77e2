package backend

import (
	"context"
	"slices"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// Placement among several nodes.
//
// A claim of an Immediate-binding class that names several nodes (its
// allowedTopologies) reaches CreateVolume with all of them, in an order
// the provisioner derives from the claim's name: the same order at every
// retry. Taking the first alone put every such claim on a node that
// could not hold it, retried there forever (no pod is scheduled to move
// it elsewhere). So the volume goes to the first of them whose last
// report holds it, as CSIStorageCapacity would tell the scheduler; a
// WaitForFirstConsumer claim names one node only (--strict-topology), the
// scheduler's pick, and is never moved.
//
// The resource is the record of the choice: a retry whose LogicalVolume
// exists keeps its node while the request still allows it, whatever the
// reports say now. A restore or clone goes to its source's node when
// allowed: no transfer, and a thin snapshot's blocks shared.

// placeAmong sets req.Node to the node the volume goes to (see above).
func (b *Backend) placeAmong(ctx context.Context, req *volume.CreateRequest, have *v1alpha1.LogicalVolume) {
	if len(req.OtherNodes) == 0 {
		return
	}
	nodes := append([]string{req.Node}, req.OtherNodes...)
	switch {
	case have.Name != "" && slices.Contains(nodes, have.Spec.NodeName):
		req.Node = have.Spec.NodeName
		return
	case req.Source != nil && slices.Contains(nodes, req.Source.ID.Node):
		req.Node = req.Source.ID.Node
		return
	}
	choice, ok := choiceOf(*req)
	if !ok {
		return
	}
	for _, n := range nodes {
		c, err := b.Capacity(ctx, n, choice, req.Type)
		if err == nil && c.MaximumVolumeBytes >= req.RequiredBytes {
			if n != req.Node {
				klog.InfoS("Placing a volume on a node the CO allows with room for it", "name", req.Name,
					"node", n, "preferred", req.Node, "bytes", req.RequiredBytes)
			}
			req.Node = n
			return
		}
	}
}

// choiceOf is the VGs req may go in, when it says (not a restore or clone
// that takes its source's VG).
func choiceOf(req volume.CreateRequest) (volume.VGChoice, bool) {
	switch {
	case req.VGs != nil:
		return *req.VGs, true
	case req.VG != "":
		return volume.OneVG(req.VG), true
	}
	return volume.VGChoice{}, false
}
