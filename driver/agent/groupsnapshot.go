package agent

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// GroupSnapshots is the group snapshot half of the LVM semantics
// (lvmvol.Manager; driver/lvmvol/group.go has the instant and its crash
// safety).
type GroupSnapshots interface {
	CreateGroupSnapshot(ctx context.Context, name string, sources []volume.ID) (volume.GroupSnapshot, error)
	DeleteGroupSnapshot(ctx context.Context, id volume.ID) error
}

// GroupSnapshotReconciler reconciles the LogicalVolumeGroupSnapshots of
// one node. It is SnapshotReconciler for several sources: the group's
// members are reported in its status, one per source.
type GroupSnapshotReconciler struct {
	Client client.Client
	Node   string
	Groups GroupSnapshots
	// Events, when set, records what the agent did and what failed.
	Events events.EventRecorder
	// Workers is how many groups are reconciled at once; 0 means
	// DefaultWorkers.
	Workers int
}

// Reconcile takes (or resumes) the group snapshot, or deletes it. A retry
// is safe: lvmvol finds what an earlier, maybe cut, attempt made.
func (r *GroupSnapshotReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var g v1alpha1.LogicalVolumeGroupSnapshot
	if err := r.Client.Get(ctx, req.NamespacedName, &g); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if g.Spec.NodeName != r.Node {
		return ctrl.Result{}, nil
	}
	sources, err := groupSources(&g)
	if err != nil {
		return ctrl.Result{}, r.report(ctx, &g, volume.GroupSnapshot{}, err)
	}
	if !g.DeletionTimestamp.IsZero() {
		return outcome(r.remove(ctx, &g, sources[0]))
	}
	if controllerutil.AddFinalizer(&g, v1alpha1.GroupSnapshotFinalizer) {
		if err := r.Client.Update(ctx, &g); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to %s: %w", g.Name, err)
		}
	}
	grp, err := r.Groups.CreateGroupSnapshot(ctx, g.Spec.Name, sources)
	if err := r.report(ctx, &g, grp, err); err != nil {
		return outcome(err)
	}
	if !grp.Ready {
		return ctrl.Result{RequeueAfter: copyPoll}, nil // thick members still copying
	}
	return ctrl.Result{}, nil
}

// groupSources parses the spec's source IDs; the controller wrote them
// from IDs it had parsed, so an error here is a resource someone else
// wrote.
func groupSources(g *v1alpha1.LogicalVolumeGroupSnapshot) ([]volume.ID, error) {
	if len(g.Spec.SourceVolumeIDs) == 0 {
		return nil, fmt.Errorf("group snapshot %s has no sources: %w", g.Name, volume.ErrInvalidArgument)
	}
	out := make([]volume.ID, 0, len(g.Spec.SourceVolumeIDs))
	for _, s := range g.Spec.SourceVolumeIDs {
		id, err := volume.ParseID(s)
		if err != nil {
			return nil, fmt.Errorf("group snapshot %s: source %w", g.Name, err)
		}
		out = append(out, id)
	}
	return out, nil
}

// groupID is the ID the group has in its sources' VG (they share it).
func groupID(g *v1alpha1.LogicalVolumeGroupSnapshot, source volume.ID) volume.ID {
	return volume.ID{Node: source.Node, VG: source.VG, LV: volume.GroupSnapshotName(g.Spec.Name)}
}

// remove deletes every LV of the group (members, frozen points of a cut
// window) before the finalizer goes: the resource outlives its LVs.
func (r *GroupSnapshotReconciler) remove(ctx context.Context, g *v1alpha1.LogicalVolumeGroupSnapshot, source volume.ID) error {
	if !controllerutil.ContainsFinalizer(g, v1alpha1.GroupSnapshotFinalizer) {
		return nil
	}
	id := groupID(g, source)
	if err := r.Groups.DeleteGroupSnapshot(ctx, id); err != nil {
		return r.report(ctx, g, volume.GroupSnapshot{}, err)
	}
	controllerutil.RemoveFinalizer(g, v1alpha1.GroupSnapshotFinalizer)
	if err := r.Client.Update(ctx, g); err != nil {
		return fmt.Errorf("remove finalizer of %s: %w", g.Name, err)
	}
	emit(r.Events, g, "Normal", ReasonDeleted, "Delete", "removed group snapshot %s", id)
	return nil
}

func (r *GroupSnapshotReconciler) report(ctx context.Context, g *v1alpha1.LogicalVolumeGroupSnapshot, grp volume.GroupSnapshot, opErr error) error {
	st := &g.Status
	fields := outcomeFields{&st.Phase, &st.Error, &st.Conditions, &st.ObservedGeneration}
	if p := pendingOf(opErr); p != nil {
		// A thick member's wipe runs on after the group's delete call:
		// the controller keeps waiting, as for a single snapshot.
		return reportPending(ctx, r.Client, r.Events, g, fields, p, "GroupSnapshot")
	}
	wasReady := st.ReadyToUse
	fields.set(g.Generation, opErr)
	if opErr == nil {
		st.GroupSnapshotID, st.ReadyToUse, st.CreationTime = grp.ID.String(), grp.Ready, timeOrNil(grp.CreatedAt)
		st.Members = make([]v1alpha1.GroupMember, 0, len(grp.Snapshots))
		for _, s := range grp.Snapshots {
			st.Members = append(st.Members, v1alpha1.GroupMember{SnapshotID: s.ID.String(), SourceVolumeID: s.Source.String(),
				SizeBytes: s.SizeBytes, ReadyToUse: s.Ready, CreationTime: timeOrNil(s.CreatedAt)})
		}
	}
	if err := r.Client.Status().Update(ctx, g); err != nil {
		return fmt.Errorf("update status of %s: %w", g.Name, err)
	}
	switch {
	case opErr != nil:
		failed(r.Events, g, "GroupSnapshot", opErr)
	case st.ReadyToUse && !wasReady:
		emit(r.Events, g, "Normal", ReasonCreated, "GroupSnapshot", "group snapshot %s of %d volumes is ready", st.GroupSnapshotID, len(st.Members))
	}
	return opErr
}

// timeOrNil is t as an API time; nil when zero.
func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}

// SetupWithManager watches LogicalVolumeGroupSnapshots.
func (r *GroupSnapshotReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.LogicalVolumeGroupSnapshot{}).Named("logicalvolumegroupsnapshot").
		WithOptions(workers(r.Workers)).Complete(r)
}
