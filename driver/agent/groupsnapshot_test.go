package agent

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// wipingGroups deletes a group whose thick member's wipe runs on.
type wipingGroups struct{}

func (wipingGroups) CreateGroupSnapshot(context.Context, string, []volume.ID) (volume.GroupSnapshot, error) {
	return volume.GroupSnapshot{}, errors.New("not called")
}

func (wipingGroups) DeleteGroupSnapshot(context.Context, volume.ID) error {
	return &volume.PendingError{Work: "wipe", LV: "vg0/snap-x", Done: 1 << 20, Total: 4 << 20}
}

// TestGroupDeleteWhileAWipeRunsIsPending: a group whose deletion waits
// for a member's wipe says so (Ready False, reason Wiping, no Error, not
// Failed), as a single snapshot does, and keeps its finalizer: the
// controller keeps waiting instead of hearing a failure.
func TestGroupDeleteWhileAWipeRunsIsPending(t *testing.T) {
	g := &v1alpha1.LogicalVolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "group-1", Finalizers: []string{v1alpha1.GroupSnapshotFinalizer}},
		Spec:       v1alpha1.LogicalVolumeGroupSnapshotSpec{Name: "g1", NodeName: node, SourceVolumeIDs: []string{node + "/vg0/pvc-a"}},
	}
	r := newRig(t, g)
	if err := r.c.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	rec := &GroupSnapshotReconciler{Client: r.c, Node: node, Groups: wipingGroups{}}
	res, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: g.Name}})
	if err != nil || res.RequeueAfter != dataPoll {
		t.Fatalf("reconcile: %+v, %v; want a look again after %v, no error", res, err, dataPoll)
	}
	var got v1alpha1.LogicalVolumeGroupSnapshot
	if err := r.c.Get(ctx, types.NamespacedName{Name: g.Name}, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Ready()
	if got.Status.Error != nil || got.Status.Phase == v1alpha1.PhaseFailed || c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonWiping {
		t.Errorf("status while the wipe runs: %+v", got.Status)
	}
	if len(got.Finalizers) != 1 {
		t.Errorf("finalizers %v: the group went before its wipe", got.Finalizers)
	}
}
