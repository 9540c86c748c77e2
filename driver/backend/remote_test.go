package backend

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// serveTransfers publishes node's transfer address as its agent would.
func serveTransfers(ctx context.Context, t *testing.T, b *Backend, node, addr string) {
	t.Helper()
	ns := &v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := b.Client.Get(ctx, client.ObjectKeyFromObject(ns), ns); err != nil {
		if err := b.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	ns.Status.TransferAddress = addr
	if err := b.Client.Status().Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
}

func noResource(ctx context.Context, t *testing.T, b *Backend, name string) {
	t.Helper()
	var lv v1alpha1.LogicalVolume
	if err := b.Client.Get(ctx, types.NamespacedName{Name: volume.LVName(name)}, &lv); err == nil {
		t.Errorf("a refused volume left its LogicalVolume %s", lv.Name)
	}
}

// TestRestoreOnAnotherNode: a restore the scheduler put on node-b, of a
// snapshot of node-a, waits (UNAVAILABLE, nothing written) while node-a
// serves no transfers; once it does, the LogicalVolume goes to node-b
// with the snapshot as its source, at least the snapshot's size, in the
// class's VG and as encrypted as the snapshot's volume. A clone of
// node-a's volume on node-b is NOT_FOUND, and encryption asked of a plain
// snapshot INVALID_ARGUMENT; neither writes anything.
func TestRestoreOnAnotherNode(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	vol, snap := thinSnapshot(ctx, t, b, f)
	restore := req("pvc-elsewhere", 4*mib)
	restore.Node = "node-b"
	restore.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: snap.ID}

	_, err := b.CreateVolume(ctx, restore)
	wantCode(t, "node-a serving no transfers", err, codes.Unavailable)
	noResource(ctx, t, b, restore.Name)

	serveTransfers(ctx, t, b, "node-a", "10.0.0.1:7443")
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, waitErr := b.CreateVolume(short, restore) // no agent on node-b: it waits
	if waitErr == nil {
		t.Fatal("a restore on a node with no agent was made")
	}
	var lv v1alpha1.LogicalVolume
	if err := b.Client.Get(ctx, types.NamespacedName{Name: volume.LVName(restore.Name)}, &lv); err != nil {
		t.Fatalf("%v (the restore: %v)", err, waitErr)
	}
	s := lv.Spec
	if s.NodeName != "node-b" || s.VolumeGroup != "vg0" || s.RequiredBytes != snap.SizeBytes || s.Encrypted ||
		s.Source == nil || s.Source.Kind != volume.SourceSnapshot || s.Source.ID != snap.ID.String() {
		t.Errorf("the restore's LogicalVolume: %+v, want node-b, vg0, %d bytes, from %s", s, snap.SizeBytes, snap.ID)
	}

	clone := req("pvc-clone-elsewhere", 8*mib)
	clone.Node = "node-b"
	clone.Source = &volume.ContentSource{Kind: volume.SourceVolume, ID: vol.ID}
	_, err = b.CreateVolume(ctx, clone)
	wantCode(t, "a clone of another node's volume", err, codes.NotFound)
	noResource(ctx, t, b, clone.Name)

	encrypted := restore
	encrypted.Name, encrypted.Encrypted = "pvc-encrypted-elsewhere", true
	_, err = b.CreateVolume(ctx, encrypted)
	wantCode(t, "encryption asked of a plain snapshot", err, codes.InvalidArgument)
	noResource(ctx, t, b, encrypted.Name)
}
