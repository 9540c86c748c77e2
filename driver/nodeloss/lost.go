// Package nodeloss is the way out for the volumes of a node that is gone
// for good. A volume lives on one node's disks, and only that node's agent
// removes its LV and then lets its resources go (their finalizers); with
// the agent never back, the deletion of its PVCs, PVs and VolumeSnapshots
// would hang forever. An administrator declares the node lost, and then
// the controller releases what is deleted on that node without its agent.
//
// Declaring a node lost takes two explicit acts, never a timeout, because
// a node that is merely down comes back with its data:
//   - the annotation lvm.carve.dev/node-lost=true on the node's NodeStorage
//     (it outlives the Node object), and
//   - the Node object deleted, or tainted node.kubernetes.io/out-of-service
//     (Kubernetes' own mark of a node that is shut down for good, which
//     also has its pods deleted and its volumes detached at once).
//
// Releasing never deletes data: the LVs stay on the lost node's disks.
// Should the node come back after all, its Node is registered anew (no
// taint), the node is no longer lost, and its agent reports the LVs of
// released volumes as orphans for the administrator to inspect.
package nodeloss

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// Annotation, set to "true" on a node's NodeStorage, declares the node lost.
const Annotation = "lvm.carve.dev/node-lost"

// OutOfServiceTaint is the taint of Kubernetes' non-graceful node shutdown.
const OutOfServiceTaint = "node.kubernetes.io/out-of-service"

// Lost tells whether node is declared lost (see the package comment).
func Lost(ctx context.Context, r client.Reader, node string) (bool, error) {
	var ns v1alpha1.NodeStorage
	err := r.Get(ctx, types.NamespacedName{Name: node}, &ns)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get NodeStorage %s: %w", node, err)
	}
	if !Marked(&ns) {
		return false, nil
	}
	return goneOrOutOfService(ctx, r, node)
}

// Marked: ns carries the annotation.
func Marked(ns *v1alpha1.NodeStorage) bool { return ns.Annotations[Annotation] == "true" }

func goneOrOutOfService(ctx context.Context, r client.Reader, node string) (bool, error) {
	var n corev1.Node
	err := r.Get(ctx, types.NamespacedName{Name: node}, &n)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get Node %s: %w", node, err)
	}
	for _, t := range n.Spec.Taints {
		if t.Key == OutOfServiceTaint {
			return true, nil
		}
	}
	return false, nil
}
