package move

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// readyToCutOver writes the hold on the source and waits for the volume
// to be published nowhere: the user stopping the workload. The hold goes
// on before the look, so that no publish begun after the look passes
// (driver/backend's notHeld), and one begun before it either recorded
// publishedNode before the hold, where the look sees it, or fails its
// patch's test of the hold and checks again.
func (r *Reconciler) readyToCutOver(ctx context.Context, m *v1alpha1.VolumeMove) (time.Duration, error) {
	lv, err := r.held(ctx, m)
	if err != nil {
		return 0, err
	}
	if on := publishedOn(lv); on != "" {
		m.Status.Message = fmt.Sprintf("copied: waiting for the workload to stop (the volume is attached to node %s); no new pod may start with it", on)
		return poll, nil
	}
	now := metav1.Now()
	st := &m.Status
	st.Phase, st.CutOverTime, st.Message = v1alpha1.MoveCutOver, &now, "the workload stopped: taking the second snapshot"
	return 0, nil
}

// held writes the hold on the source's LogicalVolume (idempotent) and
// returns it as the API has it after that write.
func (r *Reconciler) held(ctx context.Context, m *v1alpha1.VolumeMove) (*v1alpha1.LogicalVolume, error) {
	id, err := volume.ParseID(m.Status.SourceVolumeID)
	if err != nil {
		return nil, fmt.Errorf("status of VolumeMove %s: %w", key(m), err)
	}
	lv, err := r.sourceVolume(ctx, m, id)
	if err != nil || lv.Annotations[v1alpha1.AnnotationMovedBy] == key(m) {
		return lv, err
	}
	before := lv.DeepCopy()
	metav1.SetMetaDataAnnotation(&lv.ObjectMeta, v1alpha1.AnnotationMovedBy, key(m))
	if err := r.Client.Patch(ctx, lv, client.MergeFrom(before)); err != nil {
		return nil, fmt.Errorf("hold volume %s for VolumeMove %s: %w", id, key(m), err)
	}
	klog.InfoS("Holding a volume for its move: no new attach", "volume", id, "volumeMove", key(m))
	return lv, nil
}

// publishedOn is the node the volume is attached to, "" when none: not
// in the spec, nor still active on its node.
func publishedOn(lv *v1alpha1.LogicalVolume) string {
	if lv.Spec.PublishedNode != "" {
		return lv.Spec.PublishedNode
	}
	if lv.Status.Published {
		return lv.Spec.NodeName
	}
	return ""
}

// cutOver takes S2 of the stopped volume. A ControllerPublish that read
// the volume before the hold was written cannot record publishedNode
// after it (its patch tests the hold: driver/backend's recordPublished),
// so readyToCutOver's look, after the hold, sees every attach that got
// through. publishedNode is looked at again once S2 is taken, and at each
// reconcile of this phase, all the same: it is one read, and it keeps a
// writer of the spec that skips that test (a person with kubectl) from
// losing data; when a pod got the volume after all, S2 goes and the move
// waits again for the workload to stop.
func (r *Reconciler) cutOver(ctx context.Context, m *v1alpha1.VolumeMove) (time.Duration, error) {
	lv, err := r.held(ctx, m)
	if err != nil {
		return 0, err
	}
	if on := publishedOn(lv); on != "" {
		return r.uncut(ctx, m, on)
	}
	st := &m.Status
	if st.SecondSnapshotID == "" {
		st.SecondSnapshotID = snapshotID(volumeID(lv), secondSnapshotName(m)).String()
		return 0, nil // recorded before it is taken
	}
	if wait, err := r.takeSnapshot(ctx, m, volumeID(lv), secondSnapshotName(m), st.SecondSnapshotID); err != nil || wait > 0 {
		return wait, err
	}
	if lv, err = r.held(ctx, m); err != nil {
		return 0, err
	}
	if on := publishedOn(lv); on != "" {
		return r.uncut(ctx, m, on)
	}
	target, err := r.placed(ctx, m)
	if err != nil || target == nil {
		return 0, fmt.Errorf("the target %s of VolumeMove %s is gone: %w", targetResource(m), key(m), err)
	}
	if err := r.Backend.OwnSnapshot(ctx, snapshotResource(secondSnapshotName(m)), target); err != nil {
		return 0, err
	}
	st.Phase, st.Message = v1alpha1.MoveCatchUp, "catching up with what the workload wrote since the copy"
	return 0, nil
}

// uncut undoes a cut-over that a pod's attach slipped into: S2 is
// deleted (it may hold less than that pod writes), and once it is gone
// the move waits for the workload to stop again.
func (r *Reconciler) uncut(ctx context.Context, m *v1alpha1.VolumeMove, on string) (time.Duration, error) {
	gone, err := r.drop(ctx, &v1alpha1.LogicalVolumeSnapshot{}, snapshotResource(secondSnapshotName(m)))
	if err != nil {
		return 0, err
	}
	st := &m.Status
	if !gone {
		st.Message = fmt.Sprintf("the volume was attached to node %s during the cut-over: dropping the second snapshot", on)
		return poll, nil
	}
	klog.InfoS("A pod got the volume during the cut-over; its move waits for the workload to stop again", "volumeMove", key(m), "node", on)
	st.Phase, st.SecondSnapshotID, st.CutOverTime = v1alpha1.MoveReadyToCutOver, "", nil
	st.Message = fmt.Sprintf("the volume was attached to node %s during the cut-over: waiting for the workload to stop again", on)
	r.emit(ctx, m, corev1.EventTypeWarning, ReasonReadyToCutOver,
		"claim %s was attached to node %s as its move cut over: stop its workload again", m.Spec.Claim, on)
	return 0, nil
}

func volumeID(lv *v1alpha1.LogicalVolume) volume.ID {
	return volume.ID{Node: lv.Spec.NodeName, VG: lv.Spec.VolumeGroup, LV: lv.Name}
}

// catchUp asks the target's agent to catch up to S2 (spec.catchUpTo)
// and waits until its status says it has.
func (r *Reconciler) catchUp(ctx context.Context, m *v1alpha1.VolumeMove) (time.Duration, error) {
	target, err := r.placed(ctx, m)
	if err != nil || target == nil {
		return 0, fmt.Errorf("the target %s of VolumeMove %s is gone: %w", targetResource(m), key(m), err)
	}
	s2 := m.Status.SecondSnapshotID
	if target.Spec.CatchUpTo != s2 {
		before := target.DeepCopy()
		target.Spec.CatchUpTo = s2
		if err := r.Client.Patch(ctx, target, client.MergeFrom(before)); err != nil {
			return 0, fmt.Errorf("catch the target %s of VolumeMove %s up to %s: %w", target.Name, key(m), s2, err)
		}
		return poll, nil
	}
	if target.Status.CaughtUpTo == s2 && target.Status.ObservedGeneration == target.Generation {
		m.Status.Phase, m.Status.Message = v1alpha1.MoveSwap, "caught up: binding the claim to the new volume"
		return 0, nil
	}
	if e := target.Status.Error; e != nil && target.Status.ObservedGeneration == target.Generation {
		m.Status.Message = fmt.Sprintf("catching up (the agent of node %s retries): %s", target.Spec.NodeName, e.Message)
	}
	return poll, nil
}
