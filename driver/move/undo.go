package move

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// undo is the Failed step, and what a move deleted before its swap
// does: the hold goes first (the claim's pods may start again at once),
// then the target and the snapshots, found by their names (the status
// may not have recorded them). The claim was never touched before the
// swap, which does not fail. Done again, it finds nothing to do.
func (r *Reconciler) undo(ctx context.Context, m *v1alpha1.VolumeMove) (time.Duration, error) {
	if err := r.release(ctx, m); err != nil {
		return 0, err
	}
	gone, err := r.drop(ctx, &v1alpha1.LogicalVolume{}, targetResource(m))
	if err != nil || !gone {
		return poll, err
	}
	if gone, err = r.dropAll(ctx, m, snapshotResource(secondSnapshotName(m)), snapshotResource(firstSnapshotName(m))); err != nil || !gone {
		return poll, err
	}
	return 0, nil
}

// release removes the hold, if it is m's.
func (r *Reconciler) release(ctx context.Context, m *v1alpha1.VolumeMove) error {
	id, err := volume.ParseID(m.Status.SourceVolumeID)
	if err != nil {
		return nil // never resolved: never held
	}
	var lv v1alpha1.LogicalVolume
	if err := r.API.Get(ctx, client.ObjectKey{Name: id.LV}, &lv); err != nil {
		return client.IgnoreNotFound(err)
	}
	if lv.Annotations[v1alpha1.AnnotationMovedBy] != key(m) {
		return nil
	}
	before := lv.DeepCopy()
	delete(lv.Annotations, v1alpha1.AnnotationMovedBy)
	if err := r.Client.Patch(ctx, &lv, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("release the hold of VolumeMove %s on volume %s: %w", key(m), id, client.IgnoreNotFound(err))
	}
	klog.InfoS("Released a volume's hold", "volume", id, "volumeMove", key(m))
	return nil
}

// drop deletes the cluster-scoped resource name (of obj's kind), and
// tells whether it is gone: its agent lets it go once it removed the LV.
func (r *Reconciler) drop(ctx context.Context, obj client.Object, name string) (gone bool, err error) {
	err = r.API.Get(ctx, client.ObjectKey{Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get %s: %w", name, err)
	}
	if obj.GetDeletionTimestamp().IsZero() {
		if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("delete %s: %w", name, err)
		}
	}
	return false, nil
}

// dropAll drops the snapshots named, all at once.
func (r *Reconciler) dropAll(ctx context.Context, m *v1alpha1.VolumeMove, names ...string) (bool, error) {
	all := true
	for _, n := range names {
		gone, err := r.drop(ctx, &v1alpha1.LogicalVolumeSnapshot{}, n)
		if err != nil {
			return false, fmt.Errorf("snapshot of VolumeMove %s: %w", key(m), err)
		}
		all = all && gone
	}
	return all, nil
}
