package agent

import (
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// CacheOptions make a manager's cache keep, and watch, only node's objects:
// its LogicalVolumes, LogicalVolumeSnapshots and LogicalVolumeGroupSnapshots
// (by the CRDs' selectable field spec.nodeName) and its NodeStorage (by
// name). However many volumes the cluster holds, a node lists and watches
// its own, and its reconciles and storage reports read them from memory: at
// idle, the agent costs the API server nothing.
func CacheOptions(node string) cache.Options {
	mine := cache.ByObject{Field: v1alpha1.OnNode(node)}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&v1alpha1.LogicalVolume{}:              mine,
		&v1alpha1.LogicalVolumeSnapshot{}:      mine,
		&v1alpha1.LogicalVolumeGroupSnapshot{}: mine,
		&v1alpha1.NodeStorage{}:                {Field: fields.OneTermEqualSelector("metadata.name", node)},
	}}
}
