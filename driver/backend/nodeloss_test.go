package backend

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/nodeloss"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// A volume published on a node that is gone for good: with no agent to
// answer, detach and delete finish once the node is declared lost (its
// NodeStorage annotated, its Node deleted: here never registered), and
// its LV is left alone (no agent ran, nothing removed it).
func TestLostNodesVolumeDetachesAndDeletes(t *testing.T) {
	c := apiClient(t, server.Config)
	if err := clientgoscheme.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	b := &Backend{Client: c, Cache: c, Changes: watched(t), VGs: []string{"vg0"}}
	ctx := within(t)
	id := volume.ID{Node: "node-gone", VG: "vg0", LV: "pvc-1"}
	lv := &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: id.LV, Finalizers: []string{v1alpha1.VolumeFinalizer}},
		Spec: v1alpha1.LogicalVolumeSpec{Name: id.LV, NodeName: id.Node, VolumeGroup: id.VG, RequiredBytes: mib,
			ParamsDigest: "d", PublishedNode: id.Node}}
	if err := c.Create(ctx, lv); err != nil {
		t.Fatal(err)
	}
	lv.Status = v1alpha1.LogicalVolumeStatus{VolumeID: id.String(), SizeBytes: mib, Published: true,
		ObservedGeneration: lv.Generation, Phase: v1alpha1.PhaseReady}
	if err := c.Status().Update(ctx, lv); err != nil {
		t.Fatal(err)
	}
	ns := &v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: id.Node}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}

	// Not declared lost: the detach waits for the agent.
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := b.UnpublishVolume(short, id, id.Node); err == nil {
		t.Fatal("detach of a node that is only down returned without its agent")
	}

	ns.Annotations = map[string]string{nodeloss.Annotation: "true"}
	if err := c.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := b.UnpublishVolume(ctx, id, id.Node); err != nil {
		t.Fatalf("detach on a lost node: %v", err)
	}
	// The release is the controller's nodeloss.Reconciler, running
	// beside the backend in carve controller.
	rel := &nodeloss.Reconciler{Client: c}
	go func() {
		for ctx.Err() == nil {
			_, _ = rel.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: id.Node}})
			time.Sleep(100 * time.Millisecond)
		}
	}()
	if err := b.DeleteVolume(ctx, id); err != nil {
		t.Fatalf("delete on a lost node: %v", err)
	}
	if _, err := b.GetVolume(ctx, lvm.Fresh, id); err == nil {
		t.Error("the volume is still there after its delete")
	}
}
