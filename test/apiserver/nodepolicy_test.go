package apiserver_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/test/apiserver"
	"carve.dev/carve/test/lvmfake"
)

// server is the package's API server (TestMain).
var server *apiserver.Server

func TestMain(m *testing.M) { os.Exit(apiserver.RunTests(m, &server)) }

const (
	ns       = "carve-system"
	policy   = "carve-node-own-node"
	nodeA    = "node-a"
	nodeB    = "node-b"
	denyText = "ValidatingAdmissionPolicy '" + policy + "'"
)

var ctx = context.Background()

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// applyFile creates every object of one of deploy/'s manifests, as
// written (the file itself, not a copy); objects that exist (an earlier
// run of the test, -count) are kept.
func applyFile(t *testing.T, c client.Client, rel string) {
	t.Helper()
	path := filepath.Join("..", "..", rel)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	d := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var u unstructured.Unstructured
		if err := d.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatalf("%s: %v", rel, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(ctx, &u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: create %s %s: %v", rel, u.GetKind(), u.GetName(), err)
		}
	}
}

// token asks the TokenRequest API for a token of ServiceAccount sa, bound
// to pod when it is not nil.
func token(t *testing.T, admin client.Client, sa string, pod *corev1.Pod) string {
	t.Helper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}
	if pod != nil {
		tr.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	acct := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}
	if err := admin.SubResource("token").Create(ctx, acct, tr); err != nil {
		t.Fatalf("token of %s: %v", sa, err)
	}
	return tr.Status.Token
}

// as is a client of the API server that authenticates with a bearer token.
func as(t *testing.T, tok string) client.Client {
	t.Helper()
	cfg := rest.AnonymousClientConfig(server.Config)
	cfg.BearerToken = tok
	c, err := client.New(cfg, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The world of the test: deploy/'s namespace, RBAC and policy; nodes A
// and B; a carve node pod on A; a volume, a snapshot and a group snapshot
// on each node and B's NodeStorage (A's is the agent's to create).
type world struct {
	admin      client.Client
	agent      client.Client // carve-node with the token of its pod on A
	unbound    client.Client // carve-node with a token bound to nothing
	unplaced   client.Client // carve-node with the token of a pod on no node
	controller client.Client // carve-controller
}

func setUp(t *testing.T) *world {
	t.Helper()
	admin, err := client.New(server.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"namespace.yaml", "rbac-node.yaml", "rbac-controller.yaml", "node-policy.yaml"} {
		applyFile(t, admin, filepath.Join("deploy", "kubernetes", "base", f))
	}
	for _, n := range []string{nodeA, nodeB} {
		if err := admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	pod, unplaced := nodePod(t, admin, "carve-node-a", nodeA), nodePod(t, admin, "carve-node-pending", "")
	t.Cleanup(func() {
		if err := apiserver.Reset(context.Background(), admin); err != nil {
			t.Errorf("reset the API: %v", err)
		}
	})
	w := &world{
		admin:      admin,
		agent:      as(t, token(t, admin, "carve-node", pod)),
		unbound:    as(t, token(t, admin, "carve-node", nil)),
		unplaced:   as(t, token(t, admin, "carve-node", unplaced)),
		controller: as(t, token(t, admin, "carve-controller", nil)),
	}
	for _, n := range []string{nodeA, nodeB} {
		for _, o := range []client.Object{lvOn(n), snapshotOn(n), groupOn(n)} {
			if err := admin.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := admin.Create(ctx, &v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: nodeB}}); err != nil {
		t.Fatal(err)
	}
	w.waitForPolicy(t)
	return w
}

// nodePod makes (or, from an earlier run, finds) a pod of carve-node on
// node; none runs it, there is no kubelet.
func nodePod(t *testing.T, admin client.Client, name, node string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "carve-node",
			Containers: []corev1.Container{{Name: "carve", Image: "carve"}}},
	}
	err := admin.Create(ctx, pod)
	if apierrors.IsAlreadyExists(err) {
		err = admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)
	}
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

func lvOn(node string) *v1alpha1.LogicalVolume {
	return &v1alpha1.LogicalVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + node},
		Spec:       v1alpha1.LogicalVolumeSpec{Name: "pvc-" + node, NodeName: node, VolumeGroup: "vg0", RequiredBytes: 1 << 20, ParamsDigest: "d"},
	}
}

func snapshotOn(node string) *v1alpha1.LogicalVolumeSnapshot {
	return &v1alpha1.LogicalVolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap-" + node},
		Spec:       v1alpha1.LogicalVolumeSnapshotSpec{Name: "snap-" + node, NodeName: node, SourceVolumeID: node + "/vg0/pvc-" + node},
	}
}

func groupOn(node string) *v1alpha1.LogicalVolumeGroupSnapshot {
	return &v1alpha1.LogicalVolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "group-" + node},
		Spec: v1alpha1.LogicalVolumeGroupSnapshotSpec{Name: "group-" + node, NodeName: node,
			SourceVolumeIDs: []string{node + "/vg0/pvc-" + node}},
	}
}

// waitForPolicy waits until the policy refuses a request it must refuse:
// the API server loads a new policy and binding asynchronously.
func (w *world) waitForPolicy(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := w.setStatus(w.agent, "pvc-"+nodeB, v1alpha1.PhaseReady)
		switch {
		case err != nil && strings.Contains(err.Error(), denyText):
			return
		case apierrors.IsForbidden(err):
			t.Fatalf("refused, but not by the policy: %v", err)
		case time.Now().After(deadline):
			t.Fatalf("a minute after its creation, the policy still lets node A's agent write node B's volume: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setStatus reads a LogicalVolume as c and writes its status phase.
func (w *world) setStatus(c client.Client, name string, phase v1alpha1.Phase) error {
	var lv v1alpha1.LogicalVolume
	if err := c.Get(ctx, types.NamespacedName{Name: name}, &lv); err != nil {
		return err
	}
	lv.Status.Phase = phase
	return c.Status().Update(ctx, &lv)
}

// refused checks that err is the policy's refusal and that its message
// names every one of words.
func refused(t *testing.T, what string, err error, words ...string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: accepted, want the policy's refusal", what)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), denyText):
		t.Errorf("%s: %v, want the policy's refusal", what, err)
	default:
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: the refusal does not name %q: %v", what, w, err)
			}
		}
		t.Logf("%s: %v", what, err)
	}
}

// reconcile runs one reconcile of name, which must succeed.
func reconcile(t *testing.T, r interface {
	Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
}, name string) {
	t.Helper()
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
		t.Fatalf("reconcile %s as node A's agent: %v", name, err)
	}
}

func accepted(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// TestNodePolicy: deploy/'s ValidatingAdmissionPolicy lets carve node's
// agent change only its own node's resources, on a real API server, with
// the tokens the API server issues (TokenRequest, bound to a pod on node A
// as kubelet's projected token is): the agent's own work on node A goes
// through, request by request and as driver/agent's reconcilers and
// storage reporter do it; node B's volume, snapshot, group snapshot and
// NodeStorage are refused with the policy's message, moving a volume or a
// group snapshot either way too; a token of the
// ServiceAccount bound to no pod, or to a pod on no node, is refused
// everything; the controller and administrators are not matched. The
// namespace, RBAC and policy are deploy/kubernetes/base's files as they
// are, so RBAC lets through what the policy must refuse.
func TestNodePolicy(t *testing.T) {
	w := setUp(t)
	a, lvA, lvB := w.agent, "pvc-"+nodeA, "pvc-"+nodeB

	t.Run("own node", func(t *testing.T) {
		// What the agent does (driver/agent): a finalizer by update and
		// by patch, status, the NodeStorage it creates and reports in.
		var lv v1alpha1.LogicalVolume
		accepted(t, "get own volume", a.Get(ctx, types.NamespacedName{Name: lvA}, &lv))
		controllerutil.AddFinalizer(&lv, v1alpha1.VolumeFinalizer)
		accepted(t, "add a finalizer to own volume", a.Update(ctx, &lv))
		lv.Status.Phase = v1alpha1.PhaseReady
		accepted(t, "own volume's status", a.Status().Update(ctx, &lv))
		before := lv.DeepCopy()
		controllerutil.RemoveFinalizer(&lv, v1alpha1.VolumeFinalizer)
		accepted(t, "remove own volume's finalizer by patch", a.Patch(ctx, &lv, client.MergeFrom(before)))

		var s v1alpha1.LogicalVolumeSnapshot
		accepted(t, "get own snapshot", a.Get(ctx, types.NamespacedName{Name: "snap-" + nodeA}, &s))
		controllerutil.AddFinalizer(&s, v1alpha1.SnapshotFinalizer)
		accepted(t, "add a finalizer to own snapshot", a.Update(ctx, &s))
		s.Status.ReadyToUse = true
		accepted(t, "own snapshot's status", a.Status().Update(ctx, &s))

		var g v1alpha1.LogicalVolumeGroupSnapshot
		accepted(t, "get own group snapshot", a.Get(ctx, types.NamespacedName{Name: "group-" + nodeA}, &g))
		controllerutil.AddFinalizer(&g, v1alpha1.GroupSnapshotFinalizer)
		accepted(t, "add a finalizer to own group snapshot", a.Update(ctx, &g))
		g.Status.ReadyToUse = true
		accepted(t, "own group snapshot's status", a.Status().Update(ctx, &g))
		gBefore := g.DeepCopy()
		controllerutil.RemoveFinalizer(&g, v1alpha1.GroupSnapshotFinalizer)
		accepted(t, "remove own group snapshot's finalizer by patch", a.Patch(ctx, &g, client.MergeFrom(gBefore)))

		ns := &v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: nodeA}}
		accepted(t, "create own NodeStorage", a.Create(ctx, ns))
		ns.Status.OverprovisionRatio = "1"
		accepted(t, "own NodeStorage's status", a.Status().Update(ctx, ns))
	})

	// The agent itself, as carve node runs it on node A (over a fake
	// LVM), with the pod's token: it creates a volume, adds the
	// finalizer, reports Ready; takes a snapshot of it; reports the
	// node's storage; removes both and their finalizers once deleted.
	t.Run("the agent at work", func(t *testing.T) {
		f := lvmfake.New(100<<20, "vg0")
		f.PutThinPool("vg0", "pool", 50<<20, 0) // thin: the snapshot is ready at once, no copy
		m := lvmvol.NewManager(lvmvol.Config{LVM: f, Wiper: f, Node: nodeA, VolumeGroups: []string{"vg0"}})
		vols := &agent.VolumeReconciler{Client: a, Node: nodeA, Volumes: m}
		snaps := &agent.SnapshotReconciler{Client: a, Node: nodeA, Snapshots: m}
		lv, snap := lvOn(nodeA), snapshotOn(nodeA)
		lv.Name, lv.Spec.Name, lv.Spec.Type.ThinPool = "pvc-work", "pvc-work", "pool"
		snap.Name, snap.Spec.Name, snap.Spec.SourceVolumeID = "snap-work", "snap-work", nodeA+"/vg0/pvc-work"
		if err := w.admin.Create(ctx, lv); err != nil {
			t.Fatal(err)
		}
		reconcile(t, vols, lv.Name)
		var got v1alpha1.LogicalVolume
		if err := w.admin.Get(ctx, client.ObjectKeyFromObject(lv), &got); err != nil ||
			got.Status.Phase != v1alpha1.PhaseReady || !controllerutil.ContainsFinalizer(&got, v1alpha1.VolumeFinalizer) {
			t.Fatalf("after the agent's reconcile: status %+v, finalizers %v, %v", got.Status, got.Finalizers, err)
		}
		if err := w.admin.Create(ctx, snap); err != nil {
			t.Fatal(err)
		}
		reconcile(t, snaps, snap.Name)
		var gotSnap v1alpha1.LogicalVolumeSnapshot
		if err := w.admin.Get(ctx, client.ObjectKeyFromObject(snap), &gotSnap); err != nil ||
			!gotSnap.Status.ReadyToUse || !controllerutil.ContainsFinalizer(&gotSnap, v1alpha1.SnapshotFinalizer) {
			t.Fatalf("after the agent's reconcile: snapshot status %+v, finalizers %v, %v", gotSnap.Status, gotSnap.Finalizers, err)
		}

		f.SetPoolUsage("vg0", "pool", 100, 10, 0) // the report writes the volume's new health
		rep := &agent.StorageReporter{Client: a, Node: nodeA, Space: m.Space, Overprovision: 1, Volumes: m.ListVolumes}
		accepted(t, "the agent's storage report", rep.Report(ctx))
		if err := w.admin.Get(ctx, client.ObjectKeyFromObject(lv), &got); err != nil || len(got.Status.Health) == 0 {
			t.Errorf("after the agent's storage report: health %+v, %v; want ThinPoolFull", got.Status.Health, err)
		}

		for _, step := range []struct {
			obj client.Object
			r   interface {
				Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
			}
		}{{snap, snaps}, {lv, vols}} {
			if err := w.admin.Delete(ctx, step.obj); err != nil {
				t.Fatal(err)
			}
			reconcile(t, step.r, step.obj.GetName())
			if err := w.admin.Get(ctx, client.ObjectKeyFromObject(step.obj), step.obj); !apierrors.IsNotFound(err) {
				t.Errorf("%s after its deletion and the agent's reconcile: %v (finalizers %v)", step.obj.GetName(), err, step.obj.GetFinalizers())
			}
		}
	})

	t.Run("other node", func(t *testing.T) {
		var lv v1alpha1.LogicalVolume
		accepted(t, "get node B's volume (reads are not limited)", a.Get(ctx, types.NamespacedName{Name: lvB}, &lv))
		spec := lv.DeepCopy()
		spec.Spec.RequiredBytes *= 2
		refused(t, "node B's volume's spec", a.Update(ctx, spec), "node "+nodeA, "LogicalVolume "+lvB, nodeB+"'s")
		fin := lv.DeepCopy()
		controllerutil.AddFinalizer(fin, v1alpha1.VolumeFinalizer)
		refused(t, "a finalizer on node B's volume", a.Update(ctx, fin), lvB, nodeB)
		refused(t, "a finalizer on node B's volume by patch", a.Patch(ctx, fin, client.MergeFrom(&lv)), lvB, nodeB)
		st := lv.DeepCopy()
		st.Status.Phase = v1alpha1.PhaseFailed
		refused(t, "node B's volume's status", a.Status().Update(ctx, st), "LogicalVolume "+lvB+" status", nodeB)

		// Moving a volume is refused both ways: to A (its old node is B)
		// and away from A (its new node is B).
		move := lv.DeepCopy()
		move.Spec.NodeName = nodeA
		refused(t, "move node B's volume to node A", a.Update(ctx, move), lvB, "node "+nodeB+"'s", "moves it to node "+nodeA)
		var own v1alpha1.LogicalVolume
		accepted(t, "get own volume", a.Get(ctx, types.NamespacedName{Name: lvA}, &own))
		own.Spec.NodeName = nodeB
		refused(t, "move own volume to node B", a.Update(ctx, &own), lvA, "moves it to node "+nodeB)

		var s v1alpha1.LogicalVolumeSnapshot
		accepted(t, "get node B's snapshot", a.Get(ctx, types.NamespacedName{Name: "snap-" + nodeB}, &s))
		sf := s.DeepCopy()
		controllerutil.AddFinalizer(sf, v1alpha1.SnapshotFinalizer)
		refused(t, "a finalizer on node B's snapshot", a.Update(ctx, sf), "LogicalVolumeSnapshot snap-"+nodeB, nodeB)
		s.Status.ReadyToUse = true
		refused(t, "node B's snapshot's status", a.Status().Update(ctx, &s), "LogicalVolumeSnapshot snap-"+nodeB+" status")

		gB, gA := "group-"+nodeB, "group-"+nodeA
		var g v1alpha1.LogicalVolumeGroupSnapshot
		accepted(t, "get node B's group snapshot", a.Get(ctx, types.NamespacedName{Name: gB}, &g))
		gf := g.DeepCopy()
		controllerutil.AddFinalizer(gf, v1alpha1.GroupSnapshotFinalizer)
		refused(t, "a finalizer on node B's group snapshot", a.Update(ctx, gf), "LogicalVolumeGroupSnapshot "+gB, nodeB+"'s")
		refused(t, "a finalizer on node B's group snapshot by patch", a.Patch(ctx, gf, client.MergeFrom(&g)), gB, nodeB)
		gs := g.DeepCopy()
		gs.Status.ReadyToUse = true
		refused(t, "node B's group snapshot's status", a.Status().Update(ctx, gs), "LogicalVolumeGroupSnapshot "+gB+" status", nodeB)
		gm := g.DeepCopy()
		gm.Spec.NodeName = nodeA
		refused(t, "move node B's group snapshot to node A", a.Update(ctx, gm), gB, "node "+nodeB+"'s", "moves it to node "+nodeA)
		var ownG v1alpha1.LogicalVolumeGroupSnapshot
		accepted(t, "get own group snapshot", a.Get(ctx, types.NamespacedName{Name: gA}, &ownG))
		ownG.Spec.NodeName = nodeB
		refused(t, "move own group snapshot to node B", a.Update(ctx, &ownG), gA, "moves it to node "+nodeB)

		var nsB v1alpha1.NodeStorage
		accepted(t, "get NodeStorage B", a.Get(ctx, types.NamespacedName{Name: nodeB}, &nsB))
		nsB.Status.OverprovisionRatio = "9"
		refused(t, "NodeStorage B's status", a.Status().Update(ctx, &nsB), "NodeStorage "+nodeB+" status", "node "+nodeA)
		refused(t, "create NodeStorage C", a.Create(ctx, &v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: "node-c"}}),
			"NodeStorage node-c", "node node-c's")
	})

	// Fail closed: the ServiceAccount's tokens that name no node may
	// change nothing, not even node A's volume.
	t.Run("token naming no node", func(t *testing.T) {
		// An administrator impersonating the ServiceAccount: no extra at all.
		cfg := rest.CopyConfig(server.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":carve-node"}
		impersonated, err := client.New(cfg, client.Options{Scheme: scheme(t)})
		if err != nil {
			t.Fatal(err)
		}
		for what, u := range map[string]client.Client{"bound to nothing": w.unbound, "of a pod on no node": w.unplaced,
			"of nothing (impersonated: no user extra)": impersonated} {
			refused(t, "node A's volume's status with a token "+what, w.setStatus(u, lvA, v1alpha1.PhaseReady),
				"LogicalVolume "+lvA+" status", "names no node")
			var ns v1alpha1.NodeStorage
			accepted(t, "get NodeStorage B", u.Get(ctx, types.NamespacedName{Name: nodeB}, &ns))
			ns.Status.OverprovisionRatio = "2"
			refused(t, "NodeStorage B's status with a token "+what, u.Status().Update(ctx, &ns), "NodeStorage "+nodeB, "names no node")
			var g v1alpha1.LogicalVolumeGroupSnapshot
			accepted(t, "get node A's group snapshot", u.Get(ctx, types.NamespacedName{Name: "group-" + nodeA}, &g))
			g.Status.ReadyToUse = true
			refused(t, "node A's group snapshot's status with a token "+what, u.Status().Update(ctx, &g),
				"LogicalVolumeGroupSnapshot group-"+nodeA+" status", "names no node")
		}
	})

	t.Run("controller and admin", func(t *testing.T) {
		var lv v1alpha1.LogicalVolume
		accepted(t, "controller gets node B's volume", w.controller.Get(ctx, types.NamespacedName{Name: lvB}, &lv))
		before := lv.DeepCopy()
		lv.Spec.PublishedNode = nodeB
		accepted(t, "controller patches node B's volume", w.controller.Patch(ctx, &lv, client.MergeFrom(before)))
		accepted(t, "admin writes node B's volume's status", w.setStatus(w.admin, lvB, v1alpha1.PhaseReady))
		var ns v1alpha1.NodeStorage
		accepted(t, "get NodeStorage B", w.admin.Get(ctx, types.NamespacedName{Name: nodeB}, &ns))
		ns.Status.OverprovisionRatio = "3"
		accepted(t, "admin writes NodeStorage B's status", w.admin.Status().Update(ctx, &ns))

		// The controller creates and deletes group snapshots on any node
		// (driver/backend; the node agent may do neither).
		g := groupOn(nodeB)
		g.Name, g.Spec.Name = "group-by-controller", "group-by-controller"
		accepted(t, "controller creates a group snapshot on node B", w.controller.Create(ctx, g))
		accepted(t, "controller deletes it", w.controller.Delete(ctx, g))
	})
}
