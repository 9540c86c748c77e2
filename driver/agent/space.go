package agent

import (
	"context"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/api/v1alpha1"
)

// spaceChanged runs f, a reconciler's SpaceChanged hook (nil: none),
// after a change that took or freed space on the node. A failure is only
// logged: the change is done, and the next periodic storage report writes
// the space anyway.
func spaceChanged(ctx context.Context, f func(context.Context) error, what, name string) {
	if f == nil {
		return
	}
	if err := f(ctx); err != nil {
		klog.ErrorS(err, "Could not write the node's space after a change; the next storage report will", "change", what, "resource", name)
	}
}

// allocationChanged tells whether a volume's successful reconcile took or
// freed space: it was carved (or recreated), grew, or changed its legs or
// write cache.
func allocationChanged(before, after v1alpha1.LogicalVolumeStatus) bool {
	return before.VolumeID != after.VolumeID || before.SizeBytes != after.SizeBytes ||
		before.Mirrors != after.Mirrors || !before.WriteCache.Same(after.WriteCache)
}
