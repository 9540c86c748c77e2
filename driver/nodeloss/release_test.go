package nodeloss

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/test/apiserver"
)

// server is the real API server of the package's tests (TestMain).
var server *apiserver.Server

func TestMain(m *testing.M) { os.Exit(apiserver.RunTests(m, &server)) }

const node = "node-lost"

func newClient(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(server.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if err := apiserver.Reset(ctx, c); err != nil {
			t.Errorf("reset the API: %v", err)
		}
		if err := c.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete the Node: %v", err)
		}
	})
	return c
}

// rig: node's NodeStorage (annotated lost when marked), a volume, a
// snapshot and a group snapshot on it being deleted (held by the agent's finalizers), one of
// each still in use, and a volume of another node being deleted.
func rig(t *testing.T, c client.Client, marked bool) {
	t.Helper()
	ctx := context.Background()
	ns := &v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if marked {
		ns.Annotations = map[string]string{Annotation: "true"}
	}
	objs := []client.Object{ns,
		volumeOn("pvc-deleted", node), volumeOn("pvc-kept", node), volumeOn("pvc-elsewhere", "node-alive"),
		snapshotOn("snap-deleted", node), snapshotOn("snap-kept", node), groupOn("group-deleted", node), groupOn("group-kept", node)}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []client.Object{objs[1], objs[3], objs[4], objs[6]} {
		if err := c.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

func volumeOn(name, node string) *v1alpha1.LogicalVolume {
	return &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{v1alpha1.VolumeFinalizer}},
		Spec: v1alpha1.LogicalVolumeSpec{Name: name, NodeName: node, VolumeGroup: "vg0", RequiredBytes: 1 << 20, ParamsDigest: "d"}}
}

func snapshotOn(name, node string) *v1alpha1.LogicalVolumeSnapshot {
	return &v1alpha1.LogicalVolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{v1alpha1.SnapshotFinalizer}},
		Spec: v1alpha1.LogicalVolumeSnapshotSpec{Name: name, NodeName: node, SourceVolumeID: node + "/vg0/pvc-kept"}}
}

func groupOn(name, node string) *v1alpha1.LogicalVolumeGroupSnapshot {
	return &v1alpha1.LogicalVolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{v1alpha1.GroupSnapshotFinalizer}},
		Spec: v1alpha1.LogicalVolumeGroupSnapshotSpec{Name: name, NodeName: node, SourceVolumeIDs: []string{node + "/vg0/pvc-kept"}}}
}

// exists lists which of names are still in the API.
func exists(t *testing.T, c client.Client) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	var lvs v1alpha1.LogicalVolumeList
	var snaps v1alpha1.LogicalVolumeSnapshotList
	var groups v1alpha1.LogicalVolumeGroupSnapshotList
	for _, l := range []client.ObjectList{&lvs, &snaps, &groups} {
		if err := c.List(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range lvs.Items {
		out[o.Name] = true
	}
	for _, o := range snaps.Items {
		out[o.Name] = true
	}
	for _, o := range groups.Items {
		out[o.Name] = true
	}
	return out
}

func reconcileNode(t *testing.T, c client.Client, rec events.EventRecorder) {
	t.Helper()
	r := &Reconciler{Client: c, Events: rec}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Name: node}}); err != nil {
		t.Fatal(err)
	}
}

// A node declared lost (annotated, its Node deleted) has its deleted
// volumes, snapshots and group snapshots released; those in use stay and are reported;
// another node's deletion waits for its own agent.
func TestLostNodeReleasesWhatIsDeleted(t *testing.T) {
	c := newClient(t)
	rig(t, c, true)
	rec := events.NewFakeRecorder(10)
	reconcileNode(t, c, rec)
	got := exists(t, c)
	for name, want := range map[string]bool{"pvc-deleted": false, "snap-deleted": false, "pvc-kept": true, "snap-kept": true, "pvc-elsewhere": true,
		"group-deleted": false, "group-kept": true} {
		if got[name] != want {
			t.Errorf("%s exists: %v, want %v", name, got[name], want)
		}
	}
	evs := strings.Join(drain(rec), "\n")
	for _, want := range []string{"Normal Released node node-lost is declared lost: deleted without its agent; LV vg0/pvc-deleted stays",
		"Normal Released node node-lost is declared lost: deleted without its agent; LV snap-deleted stays",
		"Normal Released node node-lost is declared lost: deleted without its agent; LV group-deleted stays",
		"Warning NodeLost 1 volumes and 2 snapshots remain on lost node node-lost"} {
		if !strings.Contains(evs, want) {
			t.Errorf("events:\n%s\nwant one starting %q", evs, want)
		}
	}
	if lost, err := Lost(context.Background(), c, node); err != nil || !lost {
		t.Errorf("Lost: %v, %v; want true", lost, err)
	}
}

// Without both acts, nothing is released: the annotation alone (the Node
// still registered, in service), or a Node out of service alone.
func TestNothingReleasedUntilDeclaredLost(t *testing.T) {
	for _, tc := range []struct {
		name   string
		marked bool
		taint  bool
	}{{"annotation, node registered", true, false}, {"node out of service, no annotation", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
			if tc.taint {
				n.Spec.Taints = []corev1.Taint{{Key: OutOfServiceTaint, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}
			}
			if err := c.Create(context.Background(), n); err != nil {
				t.Fatal(err)
			}
			rig(t, c, tc.marked)
			reconcileNode(t, c, nil)
			if got := exists(t, c); !got["pvc-deleted"] || !got["snap-deleted"] || !got["group-deleted"] {
				t.Errorf("released %v without the node declared lost", got)
			}
			if lost, err := Lost(context.Background(), c, node); err != nil || lost {
				t.Errorf("Lost: %v, %v; want false", lost, err)
			}
		})
	}
}

// Kubernetes' out-of-service taint counts as the Node's deletion.
func TestOutOfServiceNodeIsLostWhenMarked(t *testing.T) {
	c := newClient(t)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: corev1.NodeSpec{
		Taints: []corev1.Taint{{Key: OutOfServiceTaint, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}}}}
	if err := c.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	rig(t, c, true)
	reconcileNode(t, c, nil)
	deadline := time.Now().Add(5 * time.Second)
	for got := exists(t, c); got["pvc-deleted"] || got["snap-deleted"]; got = exists(t, c) {
		if time.Now().After(deadline) {
			t.Fatalf("not released: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
