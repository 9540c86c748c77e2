package agent

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
)

// Carving, growing and deleting a volume write the node's space into its
// NodeStorage at once, with no periodic report in between; a deletion
// writes it while the resource still holds its finalizer, so that the
// space is current when the controller's DeleteVolume (which waits for the
// resource to go) returns.
func TestVolumeChangesWriteTheSpaceAtOnce(t *testing.T) {
	r := newRig(t, lvResource("pvc-1", node, 5*mib))
	vols := lvmvol.NewManager(lvmvol.Config{LVM: r.lvm, Wiper: r.lvm, Node: node, VolumeGroups: []string{"vg0"}})
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1}
	reportedOn(t, r, rep) // the NodeStorage exists, as it does once the agent runs
	if got := freeOf(t, r); got != 100*mib {
		t.Fatalf("free before any volume: %d, want %d", got, 100*mib)
	}
	calls, heldFinalizer := 0, false
	r.r.SpaceChanged = func(ctx context.Context) error {
		calls++
		var lv v1alpha1.LogicalVolume
		heldFinalizer = r.c.Get(ctx, types.NamespacedName{Name: "pvc-1"}, &lv) == nil && len(lv.Finalizers) == 1
		return rep.RefreshSpace(ctx)
	}

	lv, err := r.reconcile("pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := freeOf(t, r); calls != 1 || got != 92*mib {
		t.Fatalf("after the carve: free %d after %d refreshes, want %d after 1", got, calls, 92*mib)
	}
	if _, err := r.reconcile("pvc-1"); err != nil || calls != 1 {
		t.Fatalf("a reconcile that changed nothing: %d refreshes (%v), want none more", calls, err)
	}
	r.update(lv, func(lv *v1alpha1.LogicalVolume) { lv.Spec.RequiredBytes = 20 * mib })
	if _, err := r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	if got := freeOf(t, r); calls != 2 || got != 80*mib {
		t.Fatalf("after the growth: free %d after %d refreshes, want %d after 2", got, calls, 80*mib)
	}
	if err := r.c.Delete(ctx, lv); err != nil {
		t.Fatal(err)
	}
	if lv, err = r.reconcile("pvc-1"); err != nil || lv != nil {
		t.Fatalf("after delete: %+v, %v; want the resource gone", lv, err)
	}
	if got := freeOf(t, r); calls != 3 || got != 100*mib || !heldFinalizer {
		t.Fatalf("after the deletion: free %d after %d refreshes (finalizer still on: %v), want %d after 3, the finalizer on",
			got, calls, heldFinalizer, 100*mib)
	}
}

// A refresh that fails fails nothing: the change is done, and the next
// report writes the space.
func TestAFailedSpaceRefreshFailsNoChange(t *testing.T) {
	r := newRig(t, lvResource("pvc-1", node, 5*mib))
	r.r.SpaceChanged = func(context.Context) error { return context.DeadlineExceeded }
	lv, err := r.reconcile("pvc-1")
	if err != nil || lv.Status.Phase != v1alpha1.PhaseReady {
		t.Fatalf("carve with a failing refresh: %+v, %v; want Ready", lv.Status, err)
	}
	if err := r.c.Delete(ctx, lv); err != nil {
		t.Fatal(err)
	}
	if lv, err = r.reconcile("pvc-1"); err != nil || lv != nil {
		t.Fatalf("delete with a failing refresh: %+v, %v; want the resource gone", lv, err)
	}
}

// A snapshot's LV takes space when it is made and gives it back when it is
// deleted: both write the node's space at once, the deletion while the
// resource still holds its finalizer.
func TestSnapshotChangesWriteTheSpaceAtOnce(t *testing.T) {
	r := newRig(t, lvResource("pvc-1", node, 8*mib))
	if _, err := r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	vols := lvmvol.NewManager(lvmvol.Config{LVM: r.lvm, Wiper: r.lvm, Copier: r.lvm, Node: node, VolumeGroups: []string{"vg0"}})
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1}
	reportedOn(t, r, rep)
	calls, heldFinalizer := 0, false
	sr := &SnapshotReconciler{Client: r.c, Node: node, Snapshots: vols, SpaceChanged: func(ctx context.Context) error {
		calls++
		var s v1alpha1.LogicalVolumeSnapshot
		heldFinalizer = r.c.Get(ctx, types.NamespacedName{Name: "snap-1"}, &s) == nil && len(s.Finalizers) == 1
		return rep.RefreshSpace(ctx)
	}}
	s := &v1alpha1.LogicalVolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "snap-1"},
		Spec: v1alpha1.LogicalVolumeSnapshotSpec{Name: "snap-1", NodeName: node, SourceVolumeID: node + "/vg0/pvc-1"}}
	if err := r.c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	reconcileSnap := func() {
		t.Helper()
		if _, err := sr.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "snap-1"}}); err != nil {
			t.Fatal(err)
		}
	}
	reconcileSnap()
	if got := freeOf(t, r); calls != 1 || got != 84*mib {
		t.Fatalf("after the snapshot: free %d after %d refreshes, want %d after 1", got, calls, 84*mib)
	}
	reconcileSnap()
	if calls != 1 {
		t.Fatalf("a reconcile that changed nothing refreshed: %d refreshes, want 1", calls)
	}
	if err := r.c.Get(ctx, types.NamespacedName{Name: "snap-1"}, s); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	reconcileSnap()
	if got := freeOf(t, r); calls != 2 || got != 92*mib || !heldFinalizer {
		t.Fatalf("after the deletion: free %d after %d refreshes (finalizer still on: %v), want %d after 2, the finalizer on",
			got, calls, heldFinalizer, 92*mib)
	}
}

// freeOf is the free bytes the node's NodeStorage says vg0, its only VG, has.
func freeOf(t *testing.T, r *rig) int64 {
	t.Helper()
	var ns v1alpha1.NodeStorage
	if err := r.c.Get(ctx, types.NamespacedName{Name: node}, &ns); err != nil {
		t.Fatal(err)
	}
	if len(ns.Status.VolumeGroups) != 1 {
		t.Fatalf("NodeStorage VGs %+v, want vg0 alone", ns.Status.VolumeGroups)
	}
	return ns.Status.VolumeGroups[0].FreeBytes
}
