package move

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// SetupWithManager reconciles a move when it changes, and when what it
// waits for does: its source's or target's LogicalVolume (the agent's
// work, publishedNode), its snapshots, its claim (the swap; its
// metadata only, of every claim). A poll
// backs the watches up (poll).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("volumemove").
		For(&v1alpha1.VolumeMove{}).
		Watches(&v1alpha1.LogicalVolume{}, handler.EnqueueRequestsFromMapFunc(r.movesOfVolume)).
		Watches(&v1alpha1.LogicalVolumeSnapshot{}, handler.EnqueueRequestsFromMapFunc(movesOfSnapshot)).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(r.movesOfClaim), builder.OnlyMetadata).
		Complete(r)
}

// movesOfVolume: the moves whose source or target lv is.
func (r *Reconciler) movesOfVolume(ctx context.Context, lv client.Object) []reconcile.Request {
	return r.movesWhere(ctx, nil, func(m *v1alpha1.VolumeMove) bool {
		id, _ := volume.ParseID(m.Status.SourceVolumeID)
		return lv.GetName() == targetResource(m) || lv.GetName() == id.LV
	})
}

// movesOfSnapshot: the move a snapshot was taken for.
func movesOfSnapshot(_ context.Context, s client.Object) []reconcile.Request {
	ns, name, ok := splitKey(s.GetAnnotations()[v1alpha1.AnnotationMoveFor])
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}}
}

// movesOfClaim: the moves of a claim.
func (r *Reconciler) movesOfClaim(ctx context.Context, c client.Object) []reconcile.Request {
	return r.movesWhere(ctx, []client.ListOption{client.InNamespace(c.GetNamespace())},
		func(m *v1alpha1.VolumeMove) bool { return m.Spec.Claim == c.GetName() })
}

// movesWhere lists the moves (from the cache) that match.
func (r *Reconciler) movesWhere(ctx context.Context, opts []client.ListOption, match func(*v1alpha1.VolumeMove) bool) []reconcile.Request {
	var list v1alpha1.VolumeMoveList
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		klog.ErrorS(err, "Listing VolumeMoves failed; they are looked at again at their poll")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if m := &list.Items[i]; match(m) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(m)})
		}
	}
	return out
}

func splitKey(k string) (ns, name string, ok bool) {
	ns, name, ok = strings.Cut(k, "/")
	return ns, name, ok && ns != "" && name != ""
}
