package agent

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// TestCacheHoldsOnlyTheNodesObjects: the agent's cache lists and watches
// its own node's LogicalVolumes, snapshots, group snapshots and NodeStorage, not the
// cluster's (the API server filters by the CRDs' selectable field).
func TestCacheHoldsOnlyTheNodesObjects(t *testing.T) {
	r := newRig(t, lvResource("pvc-mine", node, mib), lvResource("pvc-theirs", "node-b", mib))
	for _, o := range []client.Object{
		&v1alpha1.LogicalVolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "snap-mine"},
			Spec: v1alpha1.LogicalVolumeSnapshotSpec{Name: "s1", NodeName: node, SourceVolumeID: node + "/vg0/pvc-mine"}},
		&v1alpha1.LogicalVolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "snap-theirs"},
			Spec: v1alpha1.LogicalVolumeSnapshotSpec{Name: "s2", NodeName: "node-b", SourceVolumeID: "node-b/vg0/pvc-theirs"}},
		&v1alpha1.LogicalVolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "group-mine"},
			Spec: v1alpha1.LogicalVolumeGroupSnapshotSpec{Name: "g1", NodeName: node, SourceVolumeIDs: []string{node + "/vg0/pvc-mine"}}},
		&v1alpha1.LogicalVolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "group-theirs"},
			Spec: v1alpha1.LogicalVolumeGroupSnapshotSpec{Name: "g2", NodeName: "node-b", SourceVolumeIDs: []string{"node-b/vg0/pvc-theirs"}}},
		&v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: node}},
		&v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}},
	} {
		if err := r.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	opts := CacheOptions(node)
	opts.Scheme = s
	ca, err := cache.New(server.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lvs v1alpha1.LogicalVolumeList
	var snaps v1alpha1.LogicalVolumeSnapshotList
	var groups v1alpha1.LogicalVolumeGroupSnapshotList
	var stores v1alpha1.NodeStorageList
	// List starts each kind's informer (with the options' selection) and
	// waits for it to sync.
	go func() { _ = ca.Start(cctx) }()
	if !ca.WaitForCacheSync(cctx) {
		t.Fatal("cache not synced")
	}
	for _, l := range []client.ObjectList{&lvs, &snaps, &groups, &stores} {
		if err := ca.List(cctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if len(lvs.Items) != 1 || lvs.Items[0].Name != "pvc-mine" {
		t.Errorf("cached LogicalVolumes: %v", names(lvs.Items))
	}
	if len(snaps.Items) != 1 || snaps.Items[0].Name != "snap-mine" {
		t.Errorf("cached LogicalVolumeSnapshots: %v", names(snaps.Items))
	}
	if len(groups.Items) != 1 || groups.Items[0].Name != "group-mine" {
		t.Errorf("cached LogicalVolumeGroupSnapshots: %v", names(groups.Items))
	}
	if len(stores.Items) != 1 || stores.Items[0].Name != node {
		t.Errorf("cached NodeStorages: %v", names(stores.Items))
	}
}

func names[T any, P interface {
	*T
	client.Object
}](items []T) []string {
	var out []string
	for i := range items {
		out = append(out, P(&items[i]).GetName())
	}
	return out
}
