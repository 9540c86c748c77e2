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
	"carve.dev/carve/lvm"
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
// class's VG and as encrypted as the snapshot's volume. Encryption asked
// of a plain snapshot is INVALID_ARGUMENT, and writes nothing.
func TestRestoreOnAnotherNode(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	_, snap := thinSnapshot(ctx, t, b, f)
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

	encrypted := restore
	encrypted.Name, encrypted.Encrypted = "pvc-encrypted-elsewhere", true
	_, err = b.CreateVolume(ctx, encrypted)
	wantCode(t, "encryption asked of a plain snapshot", err, codes.InvalidArgument)
	noResource(ctx, t, b, encrypted.Name)
}

// TestRestoreOnAnotherNodeWithItsVolumeGone: the snapshot's status says
// whether it holds encrypted data (its agent read the LV), so a restore
// on another node is placed once the snapshot's volume is gone too. A
// status that does not say (an older agent's) falls back to the volume's
// resource, and without that the restore is FAILED_PRECONDITION.
func TestRestoreOnAnotherNodeWithItsVolumeGone(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	vol, snap := thinSnapshot(ctx, t, b, f)
	if err := b.DeleteVolume(ctx, vol.ID); err != nil {
		t.Fatal(err)
	}
	s, err := lookupSnapshot(ctx, b.Client, snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e := s.Status.Encrypted; e == nil || *e {
		t.Errorf("the snapshot's status says encrypted %v; want false", e)
	}
	serveTransfers(ctx, t, b, "node-a", "10.0.0.1:7443")
	restore := req("pvc-orphan-restore", 4*mib)
	restore.Node = "node-b"
	restore.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: snap.ID}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := b.CreateVolume(short, restore); volume.CodeOf(err) != codes.Aborted && volume.CodeOf(err) != codes.DeadlineExceeded {
		t.Errorf("a restore of a snapshot whose volume is gone: %v; want it placed and waiting for node-b", err)
	}
	var lv v1alpha1.LogicalVolume
	if err := b.Client.Get(ctx, types.NamespacedName{Name: volume.LVName(restore.Name)}, &lv); err != nil || lv.Spec.Encrypted {
		t.Errorf("the restore's LogicalVolume: %+v, %v; want it, not encrypted", lv.Spec, err)
	}

	s.Status.Encrypted = nil // as an older agent reported it
	_, err = b.snapshotEncrypted(ctx, snap.ID, s)
	wantCode(t, "no word on encryption, the volume gone", err, codes.FailedPrecondition)
	yes := true
	s.Status.Encrypted = &yes
	if e, err := b.snapshotEncrypted(ctx, snap.ID, s); !e || err != nil {
		t.Errorf("a snapshot whose status says encrypted: %v, %v", e, err)
	}
}

// TestCloneOnAnotherNode: a clone the scheduler put on node-b, of
// node-a's volume, waits (UNAVAILABLE, nothing written: no snapshot
// either) while node-a serves no transfers. Once it does, the controller
// takes a snapshot of the source on node-a, listed to no CO and owned by
// the clone's LogicalVolume, which goes to node-b with that snapshot as
// its source and the volume cloned in its annotation. Once node-b's
// agent reports it made, CreateVolume answers and the snapshot goes; a
// retry answers the same volume and takes no new snapshot; the name with
// another source is ALREADY_EXISTS.
func TestCloneOnAnotherNode(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	vol, userSnap := thinSnapshot(ctx, t, b, f)
	clone := req("pvc-clone-elsewhere", 4*mib)
	clone.Node, clone.Type = "node-b", volume.Type{ThinPool: "pool"}
	clone.Source = &volume.ContentSource{Kind: volume.SourceVolume, ID: vol.ID}
	viaName := cloneSnapshotResource(clone.Name)

	_, err := b.CreateVolume(ctx, clone)
	wantCode(t, "node-a serving no transfers", err, codes.Unavailable)
	noResource(ctx, t, b, clone.Name)
	var via v1alpha1.LogicalVolumeSnapshot
	if err := b.Client.Get(ctx, types.NamespacedName{Name: viaName}, &via); err == nil {
		t.Errorf("a clone that cannot travel took snapshot %s", via.Name)
	}

	serveTransfers(ctx, t, b, "node-a", "10.0.0.1:7443")
	lv := awaitCloneResource(ctx, t, b, clone)
	if err := b.Client.Get(ctx, types.NamespacedName{Name: viaName}, &via); err != nil {
		t.Fatal(err)
	}
	s := lv.Spec
	if s.NodeName != "node-b" || s.Source == nil || s.Source.Kind != volume.SourceSnapshot || s.Source.ID != via.Status.SnapshotID ||
		lv.Annotations[v1alpha1.AnnotationClonedFrom] != vol.ID.String() || via.Spec.SourceVolumeID != vol.ID.String() {
		t.Errorf("the clone's LogicalVolume: %+v %v, want node-b, from %s of %s", s, lv.Annotations, via.Status.SnapshotID, vol.ID)
	}
	if o := via.OwnerReferences; len(o) != 1 || o[0].UID != lv.UID || via.Annotations[v1alpha1.AnnotationCloneFor] != lv.Name {
		t.Errorf("the clone's snapshot: owners %+v, annotations %v; want the clone's LogicalVolume %s", o, via.Annotations, lv.UID)
	}
	if list, err := b.ListSnapshots(ctx, lvm.Fresh); err != nil || len(list) != 1 || list[0].ID != userSnap.ID {
		t.Errorf("ListSnapshots: %+v, %v; want the CO's snapshot alone", list, err)
	}

	reportMade(ctx, t, b, lv)
	got, err := b.CreateVolume(ctx, clone)
	if err != nil || got.ID.Node != "node-b" {
		t.Fatalf("the clone, made on node-b: %+v, %v", got, err)
	}
	awaitDeleted(ctx, t, b.Client, &v1alpha1.LogicalVolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: viaName}})
	again, err := b.CreateVolume(ctx, clone)
	if err != nil || again.ID != got.ID {
		t.Errorf("a retry of the made clone: %+v, %v; want %s", again, err, got.ID)
	}
	if err := b.Client.Get(ctx, types.NamespacedName{Name: viaName}, &via); err == nil {
		t.Errorf("a retry of the made clone took snapshot %s again", via.Name)
	}
	other := clone
	other.Source = &volume.ContentSource{Kind: volume.SourceVolume, ID: volume.ID{Node: "node-a", VG: "vg0", LV: "pvc-other"}}
	_, err = b.CreateVolume(ctx, other)
	wantCode(t, "the clone's name with another source", err, codes.AlreadyExists)
}

// awaitCloneResource calls CreateVolume for clone, which waits for
// node-b's agent (there is none), and returns the LogicalVolume it made.
func awaitCloneResource(ctx context.Context, t *testing.T, b *Backend, clone volume.CreateRequest) *v1alpha1.LogicalVolume {
	t.Helper()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, waitErr := b.CreateVolume(short, clone)
	if waitErr == nil {
		t.Fatal("a clone on a node with no agent was made")
	}
	var lv v1alpha1.LogicalVolume
	if err := b.Client.Get(ctx, types.NamespacedName{Name: volume.LVName(clone.Name)}, &lv); err != nil {
		t.Fatalf("%v (the clone: %v)", err, waitErr)
	}
	return &lv
}

// reportMade reports lv made, as its node's agent would.
func reportMade(ctx context.Context, t *testing.T, b *Backend, lv *v1alpha1.LogicalVolume) {
	t.Helper()
	lv.Status = v1alpha1.LogicalVolumeStatus{Phase: v1alpha1.PhaseReady, ObservedGeneration: lv.Generation,
		VolumeID: volume.ID{Node: lv.Spec.NodeName, VG: lv.Spec.VolumeGroup, LV: lv.Name}.String(), SizeBytes: lv.Spec.RequiredBytes}
	if err := b.Client.Status().Update(ctx, lv); err != nil {
		t.Fatal(err)
	}
}
