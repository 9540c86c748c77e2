package agent

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// copyPoll is how soon a snapshot whose data is still being copied is
// looked at again (nothing else would trigger a reconcile).
const copyPoll = 2 * time.Second

// Snapshots is the snapshot half of the LVM semantics (lvmvol.Manager).
type Snapshots interface {
	CreateSnapshot(ctx context.Context, name string, source volume.ID) (volume.Snapshot, error)
	DeleteSnapshot(ctx context.Context, id volume.ID) error
}

// SnapshotReconciler reconciles the LogicalVolumeSnapshots of one node.
type SnapshotReconciler struct {
	Client    client.Client
	Node      string
	Snapshots Snapshots
	// Events, when set, records what the agent did and what failed.
	Events events.EventRecorder
	// Workers is how many snapshots are reconciled at once; 0 means
	// DefaultWorkers.
	Workers int
	// SpaceChanged: as VolumeReconciler's, after a snapshot's LV is made
	// (its status then gets its ID) and after it is deleted.
	SpaceChanged func(ctx context.Context) error
}

// Reconcile takes (or resumes) the snapshot, or deletes it.
func (r *SnapshotReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s v1alpha1.LogicalVolumeSnapshot
	if err := r.Client.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if s.Spec.NodeName != r.Node {
		return ctrl.Result{}, nil
	}
	source, err := volume.ParseID(s.Spec.SourceVolumeID)
	if err != nil {
		return ctrl.Result{}, r.report(ctx, &s, volume.Snapshot{}, err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return outcome(r.remove(ctx, &s, source))
	}
	if controllerutil.AddFinalizer(&s, v1alpha1.SnapshotFinalizer) {
		if err := r.Client.Update(ctx, &s); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to %s: %w", s.Name, err)
		}
	}
	snap, err := r.Snapshots.CreateSnapshot(ctx, s.Spec.Name, source)
	if err := r.report(ctx, &s, snap, err); err != nil {
		return outcome(err) // a wipe of a half-deleted snapshot may run on
	}
	if !snap.Ready {
		return ctrl.Result{RequeueAfter: copyPoll}, nil
	}
	return ctrl.Result{}, nil
}

// snapshotID is the ID the snapshot's LV has, in its source's VG.
func snapshotID(s *v1alpha1.LogicalVolumeSnapshot, source volume.ID) volume.ID {
	return volume.ID{Node: source.Node, VG: source.VG, LV: volume.SnapshotLVName(s.Spec.Name)}
}

func (r *SnapshotReconciler) remove(ctx context.Context, s *v1alpha1.LogicalVolumeSnapshot, source volume.ID) error {
	if !controllerutil.ContainsFinalizer(s, v1alpha1.SnapshotFinalizer) {
		return nil
	}
	if err := r.Snapshots.DeleteSnapshot(ctx, snapshotID(s, source)); err != nil {
		return r.report(ctx, s, volume.Snapshot{}, err)
	}
	spaceChanged(ctx, r.SpaceChanged, "delete snapshot", s.Name)
	controllerutil.RemoveFinalizer(s, v1alpha1.SnapshotFinalizer)
	if err := r.Client.Update(ctx, s); err != nil {
		return fmt.Errorf("remove finalizer of %s: %w", s.Name, err)
	}
	emit(r.Events, s, "Normal", ReasonDeleted, "Delete", "removed snapshot LV %s", snapshotID(s, source))
	return nil
}

func (r *SnapshotReconciler) report(ctx context.Context, s *v1alpha1.LogicalVolumeSnapshot, snap volume.Snapshot, opErr error) error {
	st := &s.Status
	fields := outcomeFields{&st.Phase, &st.Error, &st.Conditions, &st.ObservedGeneration}
	if p := pendingOf(opErr); p != nil {
		return reportPending(ctx, r.Client, r.Events, s, fields, p, "Snapshot")
	}
	wasReady, hadID := st.ReadyToUse, st.SnapshotID
	fields.set(s.Generation, opErr)
	if opErr == nil {
		st.SnapshotID, st.SizeBytes, st.ReadyToUse = snap.ID.String(), snap.SizeBytes, snap.Ready
		st.Encrypted = &snap.Encrypted
		if !snap.CreatedAt.IsZero() {
			st.CreationTime = timeOrNil(snap.CreatedAt)
		}
		if hadID == "" && st.SnapshotID != "" {
			spaceChanged(ctx, r.SpaceChanged, "snapshot", s.Name)
		}
	}
	if err := r.Client.Status().Update(ctx, s); err != nil {
		return fmt.Errorf("update status of %s: %w", s.Name, err)
	}
	switch {
	case opErr != nil:
		failed(r.Events, s, "Snapshot", opErr)
	case st.ReadyToUse && !wasReady:
		emit(r.Events, s, "Normal", ReasonCreated, "Snapshot", "snapshot %s of %s is ready (%d bytes)", st.SnapshotID, s.Spec.SourceVolumeID, st.SizeBytes)
	}
	return opErr
}

// SetupWithManager watches LogicalVolumeSnapshots.
func (r *SnapshotReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.LogicalVolumeSnapshot{}).Named("logicalvolumesnapshot").
		WithOptions(workers(r.Workers)).Complete(r)
}
