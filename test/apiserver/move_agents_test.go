package apiserver_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// runAgents runs, every 20 ms until the returned stop, what the nodes'
// agents and the PV controller would do: volumes and snapshots made
// (a catch-up done, publishedNode followed), deleted ones let go, claims
// made with a volumeName bound to it, deleted ones let go (no pod
// uses them). Their writes may conflict with the
// controller's: a tick that fails is tried again at the next.
func (w *moveWorld) runAgents(t *testing.T) (stop func()) {
	t.Helper()
	actx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for actx.Err() == nil {
			w.volumeAgents(actx)
			w.snapshotAgents(actx)
			w.bindClaims(actx)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

func (w *moveWorld) volumeAgents(ctx context.Context) {
	var list v1alpha1.LogicalVolumeList
	if w.c.List(ctx, &list) != nil {
		return
	}
	for i := range list.Items {
		lv := &list.Items[i]
		if !lv.DeletionTimestamp.IsZero() {
			letGo(ctx, w.c, lv)
			continue
		}
		if lv.Status.ObservedGeneration == lv.Generation && lv.Status.VolumeID != "" {
			continue
		}
		st := &lv.Status
		st.ObservedGeneration = lv.Generation
		if w.noRoom.Load() && lv.Spec.NodeName == nodeB {
			st.Phase, st.Error = v1alpha1.PhaseFailed, &v1alpha1.OperationError{Code: "ResourceExhausted", Message: "vg0 of node-b has 1 MiB free"}
			_ = w.c.Status().Update(ctx, lv)
			continue
		}
		st.Phase, st.Error, st.SizeBytes = v1alpha1.PhaseReady, nil, lv.Spec.RequiredBytes
		st.VolumeID = volume.ID{Node: lv.Spec.NodeName, VG: lv.Spec.VolumeGroup, LV: lv.Name}.String()
		st.Published, st.CaughtUpTo = lv.Spec.PublishedNode != "", lv.Spec.CatchUpTo
		_ = w.c.Status().Update(ctx, lv)
	}
}

func (w *moveWorld) snapshotAgents(ctx context.Context) {
	var list v1alpha1.LogicalVolumeSnapshotList
	if w.c.List(ctx, &list) != nil {
		return
	}
	for i := range list.Items {
		s := &list.Items[i]
		if !s.DeletionTimestamp.IsZero() {
			letGo(ctx, w.c, s)
			continue
		}
		if s.Status.SnapshotID != "" {
			continue
		}
		src, err := volume.ParseID(s.Spec.SourceVolumeID)
		if err != nil {
			continue
		}
		plain := false
		s.Status = v1alpha1.LogicalVolumeSnapshotStatus{SnapshotID: volume.ID{Node: src.Node, VG: src.VG, LV: s.Name}.String(),
			ReadyToUse: true, SizeBytes: 64 << 20, Encrypted: &plain, ObservedGeneration: s.Generation}
		// onS2 runs before S2 reads ready: what it does (a late attach's
		// patch) is then there for the controller's look after S2. Run
		// after, it raced that look, and lost under load.
		if s.Spec.Name == "move-"+string(w.move.UID)+"-s2" {
			if f := w.onS2.Load(); f != nil {
				(*f)()
			}
		}
		_ = w.c.Status().Update(ctx, s)
	}
}

// letGo removes the agent's finalizer of a deleted resource: its LV gone.
func letGo(ctx context.Context, c client.Client, obj client.Object) {
	if controllerutil.RemoveFinalizer(obj, v1alpha1.VolumeFinalizer) || controllerutil.RemoveFinalizer(obj, v1alpha1.SnapshotFinalizer) {
		_ = c.Update(ctx, obj)
	}
}

// bindClaims binds each claim that names a PV pre-bound to it, as the
// PV controller does.
func (w *moveWorld) bindClaims(ctx context.Context) {
	var claims corev1.PersistentVolumeClaimList
	if w.c.List(ctx, &claims, client.InNamespace(moveNS)) != nil {
		return
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if !c.DeletionTimestamp.IsZero() { // the pvc-protection controller: no pod uses it
			c.Finalizers = nil
			_ = w.c.Update(ctx, c)
			continue
		}
		if w.unbound.Load() || c.Status.Phase == corev1.ClaimBound || c.Spec.VolumeName == "" {
			continue
		}
		var pv corev1.PersistentVolume
		if w.c.Get(ctx, client.ObjectKey{Name: c.Spec.VolumeName}, &pv) != nil || pv.Spec.ClaimRef == nil ||
			pv.Spec.ClaimRef.Name != c.Name || pv.Spec.ClaimRef.Namespace != c.Namespace {
			continue
		}
		pv.Spec.ClaimRef.UID = c.UID
		if w.c.Update(ctx, &pv) != nil {
			continue
		}
		c.Status.Phase = corev1.ClaimBound
		_ = w.c.Status().Update(ctx, c)
	}
}
