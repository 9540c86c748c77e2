package agent

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"carve.dev/carve/driver/api/v1alpha1"
)

// publishPriority is the queue priority of a LogicalVolume whose
// spec.publishedNode changed (controller-runtime's default is 0, an
// unchanged object's on a resync is handler.LowPriority).
//
// Why: a burst of claims (a StatefulSet scaled up, Parallel pod
// management) queues a create per claim at once, and each takes a VG
// lock in turn. The publish of a volume created early, which its pod
// waits for, otherwise queued behind every create still pending: the
// controller answered csi-attacher's ControllerPublishVolume ABORTED
// after its wait, and csi-attacher's backoff then kept pods waiting long
// after the agent was idle (a StatefulSet of 50: 8 of the activations
// while the creates ran, the last 16 over the 6 minutes after;
// docs/performance.md). An unpublish goes first too: a pod's deletion,
// and the volume's next use on another node, wait for it. Nothing else
// changes: each volume is still reconciled by one worker at a time and
// in full (the queue never holds a key twice), so the order of work
// between volumes is all that moves, and no reconcile relies on it.
const publishPriority = 10

// publishFirst enqueues LogicalVolumes as handler.EnqueueRequestForObject
// does, but a change of spec.publishedNode at publishPriority.
type publishFirst struct {
	handler.EnqueueRequestForObject
}

// Update implements handler.EventHandler.
func (h *publishFirst) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	if !ok || !publishChanged(e.ObjectOld, e.ObjectNew) {
		h.EnqueueRequestForObject.Update(ctx, e, q)
		return
	}
	pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(publishPriority)},
		reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.ObjectNew)})
}

// publishChanged: both are LogicalVolumes and name different published
// nodes.
func publishChanged(old, cur client.Object) bool {
	o, ok1 := old.(*v1alpha1.LogicalVolume)
	n, ok2 := cur.(*v1alpha1.LogicalVolume)
	return ok1 && ok2 && o.Spec.PublishedNode != n.Spec.PublishedNode
}
