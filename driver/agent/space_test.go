package agent

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	var p refreshProbe
	r.r.SpaceChanged = p.hook(r, rep, &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"}})

	lv, err := r.reconcile("pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	if got := freeOf(t, r); p.calls != 1 || got != 92*mib {
		t.Fatalf("after the carve: free %d after %d refreshes, want %d after 1", got, p.calls, 92*mib)
	}
	if _, err := r.reconcile("pvc-1"); err != nil || p.calls != 1 {
		t.Fatalf("a reconcile that changed nothing: %d refreshes (%v), want none more", p.calls, err)
	}
	r.update(lv, func(lv *v1alpha1.LogicalVolume) { lv.Spec.RequiredBytes = 20 * mib })
	if _, err := r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	if got := freeOf(t, r); p.calls != 2 || got != 80*mib {
		t.Fatalf("after the growth: free %d after %d refreshes, want %d after 2", got, p.calls, 80*mib)
	}
	if err := r.c.Delete(ctx, lv); err != nil {
		t.Fatal(err)
	}
	if lv, err = r.reconcile("pvc-1"); err != nil || lv != nil {
		t.Fatalf("after delete: %+v, %v; want the resource gone", lv, err)
	}
	if got := freeOf(t, r); p.calls != 3 || got != 100*mib || !p.heldFinalizer {
		t.Fatalf("after the deletion: free %d after %d refreshes (finalizer still on: %v), want %d after 3, the finalizer on",
			got, p.calls, p.heldFinalizer, 100*mib)
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
	var p refreshProbe
	sr := &SnapshotReconciler{Client: r.c, Node: node, Snapshots: vols,
		SpaceChanged: p.hook(r, rep, &v1alpha1.LogicalVolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "snap-1"}})}
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
	if got := freeOf(t, r); p.calls != 1 || got != 84*mib {
		t.Fatalf("after the snapshot: free %d after %d refreshes, want %d after 1", got, p.calls, 84*mib)
	}
	reconcileSnap()
	if p.calls != 1 {
		t.Fatalf("a reconcile that changed nothing refreshed: %d refreshes, want 1", p.calls)
	}
	if err := r.c.Get(ctx, types.NamespacedName{Name: "snap-1"}, s); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	reconcileSnap()
	if got := freeOf(t, r); p.calls != 2 || got != 92*mib || !p.heldFinalizer {
		t.Fatalf("after the deletion: free %d after %d refreshes (finalizer still on: %v), want %d after 2, the finalizer on",
			got, p.calls, p.heldFinalizer, 92*mib)
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

// refreshProbe stands in for a reconciler's SpaceChanged around the real
// refresh: it counts the calls and records whether the resource still
// held its finalizer at the last one.
type refreshProbe struct {
	calls         int
	heldFinalizer bool
}

// hook is the SpaceChanged that refreshes rep's space, watching obj (its
// name set; read afresh at each call).
func (p *refreshProbe) hook(r *rig, rep *StorageReporter, obj client.Object) func(context.Context) error {
	return func(ctx context.Context) error {
		p.calls++
		p.heldFinalizer = r.c.Get(ctx, client.ObjectKeyFromObject(obj), obj) == nil && len(obj.GetFinalizers()) == 1
		return rep.RefreshSpace(ctx)
	}
}
