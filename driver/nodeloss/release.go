package nodeloss

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/metrics"
)

// Event reasons of the controller's node-loss work.
const (
	// ReasonReleased (Normal, on a LogicalVolume or LogicalVolumeSnapshot):
	// its deletion finished without the lost node's agent; its LV stays.
	ReasonReleased = "Released"
	// ReasonNodeLost (Warning, on the NodeStorage): volumes or snapshots
	// remain on a node declared lost.
	ReasonNodeLost = "NodeLost"
	// ReasonNotLost (Warning, on the NodeStorage): the annotation is set
	// but the node is registered and not out of service: nothing is
	// released.
	ReasonNotLost = "NodeNotLost"
)

// Reconciler runs in carve controller (with leadership): for each node, it
// releases the resources being deleted on it once it is declared lost, and
// reports those that remain. Its request is a node's name.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API.
	Client client.Client
	// Events records what it did; nil records nothing.
	Events events.EventRecorder
}

// Reconcile looks at one node.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := req.Name
	var ns v1alpha1.NodeStorage
	if err := r.Client.Get(ctx, req.NamespacedName, &ns); err != nil {
		metrics.LostNode(node, false, 0, 0)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !Marked(&ns) {
		metrics.LostNode(node, false, 0, 0)
		return ctrl.Result{}, nil
	}
	lost, err := goneOrOutOfService(ctx, r.Client, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !lost {
		metrics.LostNode(node, false, 0, 0)
		klog.InfoS("Node is marked lost but is registered and not out of service: nothing released", "node", node)
		r.emit(&ns, corev1.EventTypeWarning, ReasonNotLost,
			"%s is annotated %s=true but its Node is registered without the %s taint: nothing is released; delete the Node or taint it once it is gone for good", node, Annotation, OutOfServiceTaint)
		return ctrl.Result{}, nil
	}
	vols, err := r.releaseVolumes(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	snaps, err := r.releaseSnapshots(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	groups, err := r.releaseGroups(ctx, node)
	if err != nil {
		return ctrl.Result{}, err
	}
	snaps += groups // a group's members are snapshots too
	metrics.LostNode(node, true, vols, snaps)
	if vols+snaps > 0 {
		klog.InfoS("Volumes remain on a lost node", "node", node, "volumes", vols, "snapshots", snaps)
		r.emit(&ns, corev1.EventTypeWarning, ReasonNodeLost,
			"%d volumes and %d snapshots remain on lost node %s, their data on its disks only: delete their PVCs and VolumeSnapshots to release them", vols, snaps, node)
	}
	return ctrl.Result{}, nil
}

// releaseVolumes releases the node's LogicalVolumes being deleted and
// counts the others.
func (r *Reconciler) releaseVolumes(ctx context.Context, node string) (remaining int, err error) {
	var list v1alpha1.LogicalVolumeList
	if err := r.Client.List(ctx, &list); err != nil {
		return 0, fmt.Errorf("list LogicalVolumes: %w", err)
	}
	for i := range list.Items {
		lv := &list.Items[i]
		if lv.Spec.NodeName != node {
			continue
		}
		if lv.DeletionTimestamp.IsZero() {
			remaining++
			continue
		}
		if err := r.release(ctx, lv, v1alpha1.VolumeFinalizer, node, lv.Spec.VolumeGroup+"/"+lv.Name); err != nil {
			return 0, err
		}
	}
	return remaining, nil
}

// releaseSnapshots is releaseVolumes for LogicalVolumeSnapshots.
func (r *Reconciler) releaseSnapshots(ctx context.Context, node string) (remaining int, err error) {
	var list v1alpha1.LogicalVolumeSnapshotList
	if err := r.Client.List(ctx, &list); err != nil {
		return 0, fmt.Errorf("list LogicalVolumeSnapshots: %w", err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		if s.Spec.NodeName != node {
			continue
		}
		if s.DeletionTimestamp.IsZero() {
			remaining++
			continue
		}
		what := s.Status.SnapshotID // node/vg/lv once taken
		if what == "" {
			what = s.Name
		}
		if err := r.release(ctx, s, v1alpha1.SnapshotFinalizer, node, what); err != nil {
			return 0, err
		}
	}
	return remaining, nil
}

// releaseGroups is releaseVolumes for LogicalVolumeGroupSnapshots.
func (r *Reconciler) releaseGroups(ctx context.Context, node string) (remaining int, err error) {
	var list v1alpha1.LogicalVolumeGroupSnapshotList
	if err := r.Client.List(ctx, &list); err != nil {
		return 0, fmt.Errorf("list LogicalVolumeGroupSnapshots: %w", err)
	}
	for i := range list.Items {
		g := &list.Items[i]
		if g.Spec.NodeName != node {
			continue
		}
		if g.DeletionTimestamp.IsZero() {
			remaining++
			continue
		}
		what := g.Status.GroupSnapshotID // node/vg/group-… once taken
		if what == "" {
			what = g.Name
		}
		if err := r.release(ctx, g, v1alpha1.GroupSnapshotFinalizer, node, what); err != nil {
			return 0, err
		}
	}
	return remaining, nil
}

// release removes the agent's finalizer, which only the lost agent would
// have removed after lvremove. The patch carries the resourceVersion read,
// so a resource changed meanwhile is reconciled again, not overwritten.
func (r *Reconciler) release(ctx context.Context, obj client.Object, finalizer, node, what string) error {
	before := obj.DeepCopyObject().(client.Object)
	if !controllerutil.RemoveFinalizer(obj, finalizer) {
		return nil
	}
	if err := r.Client.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("release %s of lost node %s: %w", obj.GetName(), node, client.IgnoreNotFound(err))
	}
	klog.InfoS("Released a deleted resource of a lost node; its LV stays on that node's disks", "node", node, "resource", obj.GetName(), "lv", what)
	r.emit(obj, corev1.EventTypeNormal, ReasonReleased,
		"node %s is declared lost: deleted without its agent; LV %s stays on that node's disks", node, what)
	return nil
}

func (r *Reconciler) emit(obj client.Object, typ, reason, note string, args ...any) {
	if r.Events != nil {
		r.Events.Eventf(obj, nil, typ, reason, "NodeLoss", note, args...)
	}
}

// SetupWithManager reconciles a node when its NodeStorage or Node changes,
// and when one of its volumes, snapshots or group snapshots does (a
// deletion to release).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetName()}}}
	})
	byNode := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		var node string
		switch o := o.(type) {
		case *v1alpha1.LogicalVolume:
			node = o.Spec.NodeName
		case *v1alpha1.LogicalVolumeSnapshot:
			node = o.Spec.NodeName
		case *v1alpha1.LogicalVolumeGroupSnapshot:
			node = o.Spec.NodeName
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: node}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("nodeloss").
		For(&v1alpha1.NodeStorage{}).
		Watches(&corev1.Node{}, byName).
		Watches(&v1alpha1.LogicalVolume{}, byNode).
		Watches(&v1alpha1.LogicalVolumeSnapshot{}, byNode).
		Watches(&v1alpha1.LogicalVolumeGroupSnapshot{}, byNode).
		Complete(r)
}
