package apiserver_test

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/csi"
	"carve.dev/carve/driver/move"
)

// TestVolumeMoveWalk: a move of a bound thin claim from node-a to node-b
// walks Copy -> ReadyToCutOver (the target a restore of S1 on node-b,
// from the class's parameters, S1 owned by it) and holds there while
// the volume is published, with the hold written; once unpublished,
// CutOver, CatchUp (the target's catchUpTo is S2) and Swap: the claim is
// bound, under its name and with its labels, user's annotations and
// spec, to a new PV with node-b's affinity and the old one's class,
// modes, mount options and reclaim policy; the old PV, the source, S1
// and S2 are gone, and the events say Moving, ReadyToCutOver, Moved.
func TestVolumeMoveWalk(t *testing.T) {
	w := setUpMove(t)
	w.publish(t, nodeA)
	w.create(t, claimName, nodeB)
	r := w.reconciler(t)
	m := w.walk(t, r, v1alpha1.MoveReadyToCutOver, nil)
	checkCopied(t, w, m)
	m = w.walk(t, r, "", func(m *v1alpha1.VolumeMove) bool { return strings.Contains(m.Status.Message, "attached to node") })
	if lv := w.sourceLV(t); lv.Annotations[v1alpha1.AnnotationMovedBy] != "shop/data-web-0-to-node-b" || m.Status.Phase != v1alpha1.MoveReadyToCutOver {
		t.Fatalf("a published volume ready to cut over: %s, hold %v", describe(m), lv.Annotations)
	}
	w.publish(t, "")
	m = w.walk(t, r, v1alpha1.MoveMoved, nil)
	checkMoved(t, w, m)
	w.wantEvents(t, move.ReasonMoving, move.ReasonReadyToCutOver, move.ReasonMoved)
}

// checkCopied: the target is on node-b, a thin restore of S1 the size of
// the source, owner of S1, and recorded in the status.
func checkCopied(t *testing.T, w *moveWorld, m *v1alpha1.VolumeMove) {
	t.Helper()
	var target v1alpha1.LogicalVolume
	if err := w.c.Get(t.Context(), client.ObjectKey{Name: "move-" + string(m.UID)}, &target); err != nil {
		t.Fatal(err)
	}
	s := target.Spec
	if s.NodeName != nodeB || s.Type.ThinPool != "pool" || s.Source == nil || s.Source.ID != m.Status.FirstSnapshotID ||
		s.RequiredBytes != 64<<20 || m.Status.TargetVolumeID != nodeB+"/vg0/"+target.Name || m.Status.CopiedPercent != 100 ||
		m.Status.FromNode != nodeA || m.Status.SourceVolumeID != sourceID {
		t.Errorf("the copy: target %+v, status %+v", s, m.Status)
	}
	var s1 v1alpha1.LogicalVolumeSnapshot
	if err := w.c.Get(t.Context(), client.ObjectKey{Name: "snap-move-" + string(m.UID) + "-s1"}, &s1); err != nil {
		t.Fatal(err)
	}
	if o := s1.OwnerReferences; len(o) != 1 || o[0].UID != target.UID || s1.Annotations[v1alpha1.AnnotationMoveFor] != "shop/data-web-0-to-node-b" {
		t.Errorf("S1: owners %+v, annotations %v; want the target's, the move's", o, s1.Annotations)
	}
}

// checkMoved: the claim is bound to the new PV, as it was otherwise;
// nothing of the old volume or the move's snapshots is left.
func checkMoved(t *testing.T, w *moveWorld, m *v1alpha1.VolumeMove) {
	t.Helper()
	var claim corev1.PersistentVolumeClaim
	if err := w.c.Get(t.Context(), client.ObjectKey{Namespace: moveNS, Name: claimName}, &claim); err != nil {
		t.Fatal(err)
	}
	var pv corev1.PersistentVolume
	if err := w.c.Get(t.Context(), client.ObjectKey{Name: m.Status.PersistentVolume}, &pv); err != nil {
		t.Fatal(err)
	}
	if claim.Spec.VolumeName != pv.Name || claim.Status.Phase != corev1.ClaimBound || claim.Labels["app"] != "web" ||
		claim.Annotations["team"] != "shop" || claim.Annotations["pv.kubernetes.io/bind-completed"] != "" ||
		*claim.Spec.StorageClassName != "carve-thin" || claim.Spec.Resources.Requests.Storage().String() != "64Mi" {
		t.Errorf("the claim made again: %+v %+v", claim.ObjectMeta, claim.Spec)
	}
	aff := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
	if pv.Spec.CSI.VolumeHandle != m.Status.TargetVolumeID || aff.Key != csi.TopologyKey || !slices.Equal(aff.Values, []string{nodeB}) ||
		pv.Spec.StorageClassName != "carve-thin" || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		!slices.Equal(pv.Spec.MountOptions, []string{"noatime"}) || pv.Spec.CSI.FSType != "ext4" || pv.Spec.ClaimRef.UID != claim.UID ||
		pv.Annotations["pv.kubernetes.io/provisioned-by"] != csi.Name {
		t.Errorf("the new PV: %+v %+v", pv.Annotations, pv.Spec)
	}
	var old corev1.PersistentVolume
	if err := w.c.Get(t.Context(), client.ObjectKey{Name: sourcePV}, &old); err == nil && old.DeletionTimestamp.IsZero() {
		t.Errorf("the old PV is left: %+v", old.Spec)
	}
	if lv := w.sourceLV(t); lv != nil {
		t.Errorf("the source volume is left: %+v", lv)
	}
	if m.Status.MovedTime == nil || m.Status.CutOverTime == nil || m.Status.MovedTime.Before(m.Status.CutOverTime) {
		t.Errorf("the move's times: %+v", m.Status)
	}
	w.nothingLeft(t, m, true)
}

// TestVolumeMoveResumes: a controller that stops at any point is
// replaced by a new one that knows only the API: here one stopped in the
// copy (S1 recorded and taken, the target placed), one stopped with the
// claim made again but not yet bound. Each goes on from the status and
// what the names find; the move ends as one that ran through.
func TestVolumeMoveResumes(t *testing.T) {
	w := setUpMove(t)
	w.create(t, claimName, nodeB)
	w.walk(t, w.reconciler(t), "", func(m *v1alpha1.VolumeMove) bool { return m.Status.TargetVolumeID != "" })
	w.unbound.Store(true)
	w.walk(t, w.reconciler(t), "", func(m *v1alpha1.VolumeMove) bool {
		var c corev1.PersistentVolumeClaim
		err := w.c.Get(t.Context(), client.ObjectKey{Namespace: moveNS, Name: claimName}, &c)
		return err == nil && m.Status.PersistentVolume != "" && c.Spec.VolumeName == m.Status.PersistentVolume
	})
	w.unbound.Store(false)
	m := w.walk(t, w.reconciler(t), v1alpha1.MoveMoved, nil)
	checkMoved(t, w, m)
}

// TestVolumeMoveRechecksPublishedAfterS2: a ControllerPublish that read
// the volume before the hold patches publishedNode after it, here just
// after S2 is taken: the move drops S2 and waits for the workload to
// stop again, with a warning; once it does, the move goes on.
func TestVolumeMoveRechecksPublishedAfterS2(t *testing.T) {
	w := setUpMove(t)
	var once atomic.Bool
	late := func() {
		if once.CompareAndSwap(false, true) {
			w.publish(t, nodeA)
		}
	}
	w.onS2.Store(&late)
	w.create(t, claimName, nodeB)
	r := w.reconciler(t)
	m := w.walk(t, r, "", func(m *v1alpha1.VolumeMove) bool {
		return once.Load() && m.Status.Phase == v1alpha1.MoveReadyToCutOver && strings.Contains(m.Status.Message, "during the cut-over")
	})
	if m.Status.SecondSnapshotID != "" || m.Status.CutOverTime != nil {
		t.Errorf("a cut-over undone: %+v", m.Status)
	}
	var s2 v1alpha1.LogicalVolumeSnapshot
	if err := w.c.Get(t.Context(), client.ObjectKey{Name: "snap-move-" + string(m.UID) + "-s2"}, &s2); !apierrors.IsNotFound(err) {
		t.Errorf("S2 of the undone cut-over: %v", err)
	}
	if events := w.wantEvents(t, move.ReasonReadyToCutOver); !slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, "Warning") }) {
		t.Errorf("no warning of the undone cut-over among %q", events)
	}
	w.publish(t, "")
	checkMoved(t, w, w.walk(t, r, v1alpha1.MoveMoved, nil))
}

// TestVolumeMoveKeepsAttributesClass: the target of a claim whose volume
// has a VolumeAttributesClass is carved with its parameters too (here an
// IO limit), as the provisioner's CreateVolume passes them: the moved
// claim names the class still, and its new volume has what it says.
func TestVolumeMoveKeepsAttributesClass(t *testing.T) {
	w := setUpMove(t)
	vac := &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: "carve-throttled"}, DriverName: csi.Name,
		Parameters: map[string]string{csi.ParamReadBPS: "1048576"}}
	if err := w.c.Create(ctx, vac); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.c.Delete(ctx, vac) })
	w.withAttributesClass(t, vac.Name)
	w.create(t, claimName, nodeB)
	m := w.walk(t, w.reconciler(t), v1alpha1.MoveReadyToCutOver, nil)
	var target v1alpha1.LogicalVolume
	if err := w.c.Get(ctx, client.ObjectKey{Name: "move-" + string(m.UID)}, &target); err != nil {
		t.Fatal(err)
	}
	if got := target.Spec.IOLimits.ReadBytesPerSecond; got != 1<<20 {
		t.Errorf("the target's read limit is %d, want the class's 1048576 (spec %+v)", got, target.Spec)
	}
}

// withAttributesClass gives the claim's volume the VolumeAttributesClass
// name, as a modification that completed leaves it.
func (w *moveWorld) withAttributesClass(t *testing.T, name string) {
	t.Helper()
	w.claimStatus(t, func(s *corev1.PersistentVolumeClaimStatus) { s.CurrentVolumeAttributesClassName = &name })
}

// TestVolumeMoveRefusals: what cannot be moved fails with a message and
// an event, and leaves nothing: no snapshot, no target, no hold, the
// claim as it was.
func TestVolumeMoveRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, claim, to, want string
		setUp                 func(*moveWorld)
	}{
		{"no claim", "data-web-9", nodeB, "claim data-web-9 not found", nil},
		{"same node", claimName, nodeA, "on node node-a already", nil},
		{"no carve node", claimName, "node-c", "node node-c runs no carve node", nil},
		{"unbound", claimName, nodeB, "not bound", func(w *moveWorld) { w.unbound.Store(true); w.setClaimPhase(t, corev1.ClaimPending) }},
		{"not Carve's", "other", nodeB, "not a Carve volume", func(w *moveWorld) { w.otherDriver(t) }},
		{"no room", claimName, nodeB, "no room", func(w *moveWorld) { w.noRoom.Store(true) }},
		{"attributes class gone", claimName, nodeB, `VolumeAttributesClass "carve-gone" of claim data-web-0 is gone`,
			func(w *moveWorld) { w.withAttributesClass(t, "carve-gone") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := setUpMove(t)
			if tc.setUp != nil {
				tc.setUp(w)
			}
			w.create(t, tc.claim, tc.to)
			m := w.walk(t, w.reconciler(t), "", func(m *v1alpha1.VolumeMove) bool {
				return m.Status.Phase == v1alpha1.MoveFailed && len(m.Finalizers) > 0 && w.leftNothing(m)
			})
			if !strings.Contains(m.Status.Message, tc.want) {
				t.Errorf("failed with %q, want it to say %q", m.Status.Message, tc.want)
			}
			w.wantEvents(t, move.ReasonMoveFailed)
			w.nothingLeft(t, m, false)
			var claim corev1.PersistentVolumeClaim
			if err := w.c.Get(t.Context(), client.ObjectKey{Namespace: moveNS, Name: claimName}, &claim); err != nil || claim.Spec.VolumeName != sourcePV {
				t.Errorf("the claim after a refusal: %+v, %v", claim.Spec, err)
			}
		})
	}
}

// leftNothing: the move's snapshots and target are gone.
func (w *moveWorld) leftNothing(m *v1alpha1.VolumeMove) bool {
	var snaps v1alpha1.LogicalVolumeSnapshotList
	var target v1alpha1.LogicalVolume
	return w.c.List(ctx, &snaps) == nil && len(snaps.Items) == 0 &&
		apierrors.IsNotFound(w.c.Get(ctx, client.ObjectKey{Name: "move-" + string(m.UID)}, &target))
}

func (w *moveWorld) setClaimPhase(t *testing.T, p corev1.PersistentVolumeClaimPhase) {
	t.Helper()
	w.claimStatus(t, func(s *corev1.PersistentVolumeClaimStatus) { s.Phase = p })
}

// claimStatus edits the claim's status as kube-controller-manager would.
func (w *moveWorld) claimStatus(t *testing.T, edit func(*corev1.PersistentVolumeClaimStatus)) {
	t.Helper()
	var c corev1.PersistentVolumeClaim
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: moveNS, Name: claimName}, &c); err != nil {
		t.Fatal(err)
	}
	edit(&c.Status)
	if err := w.c.Status().Update(ctx, &c); err != nil {
		t.Fatal(err)
	}
}

// otherDriver makes a claim "other" bound to a PV of another driver.
func (w *moveWorld) otherDriver(t *testing.T) {
	t.Helper()
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: moveNS, Name: "other"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: "pv-other",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}}}
	if err := w.c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	claim.Status.Phase = corev1.ClaimBound
	if err := w.c.Status().Update(ctx, claim); err != nil {
		t.Fatal(err)
	}
	pv := sourcePVOf(claim)
	pv.Name, pv.Spec.CSI.Driver = "pv-other", "nfs.csi.k8s.io"
	if err := w.c.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
}
