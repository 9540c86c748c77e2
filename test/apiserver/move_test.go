package apiserver_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrl "sigs.k8s.io/controller-runtime/pkg/reconcile"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/backend"
	"carve.dev/carve/driver/csi"
	"carve.dev/carve/driver/move"
	"carve.dev/carve/test/apiserver"
)

// moveWorld is a claim data-web-0 in namespace shop, bound to a thin
// volume of node-a, both nodes running carve node (node-a serving
// transfers), and the move controller over the backend. Simulated agents
// and a simulated PV controller (there is no kube-controller-manager)
// run beside it (agents).
type moveWorld struct {
	c      client.Client
	events *events.FakeRecorder
	move   *v1alpha1.VolumeMove
	// noRoom: node-b's agent refuses the target (RESOURCE_EXHAUSTED).
	noRoom atomic.Bool
	// unbound: the PV controller binds no claim.
	unbound atomic.Bool
	// onS2: called as the agent takes S2, before S2 reads ready.
	onS2 atomic.Pointer[func()]
}

const (
	moveNS    = "shop"
	claimName = "data-web-0"
	sourcePV  = "pvc-source"
	sourceID  = "node-a/vg0/pvc-source"
)

func setUpMove(t *testing.T) *moveWorld {
	t.Helper()
	c, err := client.New(server.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	w := &moveWorld{c: c, events: events.NewFakeRecorder(100)}
	t.Cleanup(func() {
		if err := apiserver.Reset(context.Background(), c); err != nil {
			t.Errorf("reset the API: %v", err)
		}
		w.clearCore(t)
	})
	w.makeSource(t)
	stop := w.runAgents(t)
	t.Cleanup(stop)
	w.move = &v1alpha1.VolumeMove{ObjectMeta: metav1.ObjectMeta{Namespace: moveNS, Name: "data-web-0-to-node-b"},
		Spec: v1alpha1.VolumeMoveSpec{Claim: claimName, ToNode: nodeB}}
	return w
}

// create creates the move with spec.
func (w *moveWorld) create(t *testing.T, claim, to string) {
	t.Helper()
	w.move.Spec = v1alpha1.VolumeMoveSpec{Claim: claim, ToNode: to}
	if err := w.c.Create(ctx, w.move); err != nil {
		t.Fatal(err)
	}
}

// makeSource makes the nodes' NodeStorages, the class, the source's
// LogicalVolume, PV and claim, as the provisioner and node-a's agent
// leave them.
func (w *moveWorld) makeSource(t *testing.T) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	must(w.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moveNS}}))
	for _, n := range []string{nodeA, nodeB} {
		ns := &v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: n}}
		must(w.c.Create(ctx, ns))
		ns.Status.TransferAddress = "10.0.0.1:7443"
		must(w.c.Status().Update(ctx, ns))
	}
	must(w.c.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "carve-thin"}, Provisioner: csi.Name,
		Parameters: map[string]string{csi.ParamThinPool: "pool", "csi.storage.k8s.io/fstype": "ext4"}}))
	lv := &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: sourcePV, Finalizers: []string{v1alpha1.VolumeFinalizer}},
		Spec: v1alpha1.LogicalVolumeSpec{Name: sourcePV, NodeName: nodeA, VolumeGroup: "vg0", RequiredBytes: 64 << 20,
			ParamsDigest: "d", Type: v1alpha1.VolumeType{ThinPool: "pool"}}}
	must(w.c.Create(ctx, lv))
	lv.Status = v1alpha1.LogicalVolumeStatus{Phase: v1alpha1.PhaseReady, VolumeID: sourceID, SizeBytes: 64 << 20, ObservedGeneration: lv.Generation}
	must(w.c.Status().Update(ctx, lv))
	claim := w.makeClaim(t)
	must(w.c.Create(ctx, sourcePVOf(claim)))
}

// makeClaim makes the claim, bound to the source's PV.
func (w *moveWorld) makeClaim(t *testing.T) *corev1.PersistentVolumeClaim {
	t.Helper()
	class := "carve-thin"
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: moveNS, Name: claimName, Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"team": "shop", "pv.kubernetes.io/bind-completed": "yes"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class, VolumeName: sourcePV,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}},
	}
	if err := w.c.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	claim.Status.Phase = corev1.ClaimBound
	if err := w.c.Status().Update(ctx, claim); err != nil {
		t.Fatal(err)
	}
	return claim
}

func sourcePVOf(claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: sourcePV, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": csi.Name}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete, StorageClassName: "carve-thin",
			MountOptions: []string{"noatime"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: csi.Name,
				VolumeHandle: sourceID, FSType: "ext4", VolumeAttributes: map[string]string{csi.ParamVolumeGroup: "vg0", csi.ParamFsType: "ext4"}}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: moveNS, Name: claimName, UID: claim.UID},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: csi.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{nodeA}}}}}}},
		},
	}
}

// clearCore removes the claims and PVs the test made (Reset clears
// Carve's resources only).
func (w *moveWorld) clearCore(t *testing.T) {
	t.Helper()
	var claims corev1.PersistentVolumeClaimList
	var pvs corev1.PersistentVolumeList
	_ = w.c.List(ctx, &claims, client.InNamespace(moveNS))
	_ = w.c.List(ctx, &pvs)
	for _, o := range append(objects(claims.Items), objects(pvs.Items)...) {
		o.SetFinalizers(nil)
		_ = w.c.Update(ctx, o)
		_ = w.c.Delete(ctx, o)
	}
	_ = w.c.Delete(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "carve-thin"}})
}

func objects[T any, P interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, 0, len(items))
	for i := range items {
		out = append(out, P(&items[i]))
	}
	return out
}

// reconciler is a new move controller, as one that starts afresh: it
// knows nothing but what the API holds.
func (w *moveWorld) reconciler(t *testing.T) *move.Reconciler {
	t.Helper()
	ca, err := cache.New(server.Config, cache.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	changes, err := backend.WatchWith(cctx, ca)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ca.Start(cctx) }()
	if !ca.WaitForCacheSync(cctx) {
		t.Fatal("cache not synced")
	}
	b := &backend.Backend{Client: w.c, Cache: w.c, Changes: changes, VGs: []string{"vg0"}}
	return &move.Reconciler{Client: w.c, API: w.c, Backend: b, Volumes: csi.NewController(b), Events: w.events}
}

// walk reconciles the move with r until it reaches phase, or (phase "")
// until stop says so; it returns the move as it is then.
func (w *moveWorld) walk(t *testing.T, r *move.Reconciler, phase v1alpha1.MovePhase, stop func(*v1alpha1.VolumeMove) bool) *v1alpha1.VolumeMove {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	m := &v1alpha1.VolumeMove{}
	for {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(w.move), m); err != nil {
			t.Fatal(err)
		}
		if (phase != "" && m.Status.Phase == phase) || (phase == "" && stop(m)) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute on, the move is %s (%s), not %s", m.Status.Phase, m.Status.Message, phase)
		}
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(w.move)})
		if err != nil {
			t.Logf("reconcile (retried): %v", err)
		}
		if err != nil || res.RequeueAfter > 0 {
			time.Sleep(50 * time.Millisecond) // the agents' turn
		}
	}
}

// sourceLV reads the source's LogicalVolume; nil once gone.
func (w *moveWorld) sourceLV(t *testing.T) *v1alpha1.LogicalVolume {
	t.Helper()
	var lv v1alpha1.LogicalVolume
	err := w.c.Get(ctx, client.ObjectKey{Name: sourcePV}, &lv)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return &lv
}

// publish sets or clears the source's publishedNode, as ControllerPublish
// and ControllerUnpublish do (a merge patch of the spec, which does not
// look at the resource's version). It may run in the agents' goroutine.
func (w *moveWorld) publish(t *testing.T, node string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"publishedNode":%q}}`, node))
	lv := &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: sourcePV}}
	if err := w.c.Patch(ctx, lv, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Errorf("publish the source to %q: %v", node, err)
	}
}

// wantEvents checks that the recorder got an event of each reason.
func (w *moveWorld) wantEvents(t *testing.T, reasons ...string) []string {
	t.Helper()
	var got []string
	for len(w.events.Events) > 0 {
		got = append(got, <-w.events.Events)
	}
	for _, r := range reasons {
		found := false
		for _, e := range got {
			found = found || strings.Contains(e, " "+r+" ")
		}
		if !found {
			t.Errorf("no %s event among %q", r, got)
		}
	}
	return got
}

// nothingLeft checks that no snapshot of the move and no target remain.
func (w *moveWorld) nothingLeft(t *testing.T, m *v1alpha1.VolumeMove, target bool) {
	t.Helper()
	var snaps v1alpha1.LogicalVolumeSnapshotList
	if err := w.c.List(ctx, &snaps); err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps.Items {
		t.Errorf("snapshot %s (%s) is left", s.Name, s.Status.SnapshotID)
	}
	var lvs v1alpha1.LogicalVolumeList
	if err := w.c.List(ctx, &lvs); err != nil {
		t.Fatal(err)
	}
	for _, lv := range lvs.Items {
		if lv.Name == "move-"+string(m.UID) && !target {
			t.Errorf("the target %s is left", lv.Name)
		}
		if lv.Annotations[v1alpha1.AnnotationMovedBy] != "" {
			t.Errorf("volume %s is still held: %v", lv.Name, lv.Annotations)
		}
	}
}

func describe(m *v1alpha1.VolumeMove) string {
	return fmt.Sprintf("%s (%s)", m.Status.Phase, m.Status.Message)
}
