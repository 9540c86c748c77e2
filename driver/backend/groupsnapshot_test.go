package backend

import (
	"context"
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// thinVolumes makes thin volumes of names on node-a through resources.
func thinVolumes(ctx context.Context, t *testing.T, b *Backend, f *lvmfake.LVM, names ...string) []volume.ID {
	t.Helper()
	f.PutThinPool("vg0", "pool", 60*mib, 0)
	var ids []volume.ID
	for _, n := range names {
		r := req(n, 8*mib)
		r.Type = volume.Type{ThinPool: "pool"}
		v, err := b.CreateVolume(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	return ids
}

// TestGroupSnapshotThroughResources: a group of two volumes taken through
// its resource; the snapshot calls find its members, which restore like
// any snapshot and are not deleted alone; the group's deletion removes
// their LVs.
func TestGroupSnapshotThroughResources(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	srcs := thinVolumes(ctx, t, b, f, "pvc-a", "pvc-b")
	g, err := b.CreateGroupSnapshot(ctx, "group-1", srcs)
	if err != nil || !g.Ready || len(g.Snapshots) != 2 {
		t.Fatalf("CreateGroupSnapshot = %+v, %v", g, err)
	}
	if want := (volume.ID{Node: "node-a", VG: "vg0", LV: volume.GroupSnapshotName("group-1")}); g.ID != want {
		t.Errorf("group ID %s, want %s", g.ID, want)
	}
	for i, s := range g.Snapshots {
		if s.Source != srcs[i] || s.Group != g.ID || !s.Ready {
			t.Errorf("member %d: %+v", i, s)
		}
	}
	if again, err := b.CreateGroupSnapshot(ctx, "group-1", srcs); err != nil || again.ID != g.ID {
		t.Errorf("repeated CreateGroupSnapshot: %+v, %v", again, err)
	}
	if _, err := b.CreateGroupSnapshot(ctx, "group-1", srcs[:1]); !errors.Is(err, volume.ErrNameConflict) {
		t.Errorf("same name, other sources: %v, want ALREADY_EXISTS", err)
	}
	if got, err := b.GetGroupSnapshot(ctx, lvm.Fresh, g.ID); err != nil || len(got.Snapshots) != 2 || !got.Ready {
		t.Errorf("GetGroupSnapshot = %+v, %v", got, err)
	}
	member := g.Snapshots[0]
	if s, err := b.GetSnapshot(ctx, lvm.Fresh, member.ID); err != nil || s.Group != g.ID || s.Source != srcs[0] {
		t.Errorf("GetSnapshot(member) = %+v, %v", s, err)
	}
	list, err := b.ListSnapshots(ctx, lvm.Fresh)
	if err != nil || !slices.ContainsFunc(list, func(s volume.Snapshot) bool { return s.ID == member.ID }) {
		t.Errorf("ListSnapshots = %+v, %v: no member", list, err)
	}
	if err := b.DeleteSnapshot(ctx, member.ID); !errors.Is(err, volume.ErrInvalidArgument) {
		t.Errorf("DeleteSnapshot(member) = %v, want INVALID_ARGUMENT", err)
	}
	restore := req("pvc-restored", 8*mib)
	restore.Type = volume.Type{ThinPool: "pool"}
	restore.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: member.ID}
	if _, err := b.CreateVolume(ctx, restore); err != nil {
		t.Fatalf("restore from a member: %v", err)
	}
	if err := b.DeleteGroupSnapshot(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	for _, s := range g.Snapshots {
		if _, ok := f.LV("vg0", s.ID.LV); ok {
			t.Errorf("member LV %s left behind", s.ID.LV)
		}
		if _, err := b.GetSnapshot(ctx, lvm.Fresh, s.ID); !errors.Is(err, volume.ErrSnapshotNotFound) {
			t.Errorf("deleted member still there: %v", err)
		}
	}
	if _, err := b.GetGroupSnapshot(ctx, lvm.Fresh, g.ID); !errors.Is(err, volume.ErrSnapshotNotFound) {
		t.Errorf("deleted group still there: %v", err)
	}
	if err := b.DeleteGroupSnapshot(ctx, g.ID); err != nil {
		t.Errorf("deleting a deleted group: %v", err)
	}
}

// TestGroupSnapshotRefusals: volumes on two nodes are refused at once,
// with no resource written; what the agent refuses (a volume named twice)
// reaches the CO with the agent's code.
func TestGroupSnapshotRefusals(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	srcs := thinVolumes(ctx, t, b, f, "pvc-a")
	other := &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-b"},
		Spec: v1alpha1.LogicalVolumeSpec{Name: "pvc-b", NodeName: "node-b", VolumeGroup: "vg0", RequiredBytes: mib, ParamsDigest: "d"}}
	if err := b.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	_, err := b.CreateGroupSnapshot(ctx, "across", append(srcs, volume.ID{Node: "node-b", VG: "vg0", LV: "pvc-b"}))
	if !errors.Is(err, volume.ErrFailedPrecondition) {
		t.Errorf("volumes on two nodes: %v, want FAILED_PRECONDITION", err)
	}
	var groups v1alpha1.LogicalVolumeGroupSnapshotList
	if err := b.Client.List(ctx, &groups); err != nil || len(groups.Items) != 0 {
		t.Errorf("a refused group left resources: %d, %v", len(groups.Items), err)
	}
	_, err = b.CreateGroupSnapshot(ctx, "twice", []volume.ID{srcs[0], srcs[0]})
	wantCode(t, "a volume named twice", err, codes.InvalidArgument)
	if _, err := b.CreateGroupSnapshot(ctx, "gone", []volume.ID{{Node: "node-a", VG: "vg0", LV: "pvc-none"}}); !errors.Is(err, volume.ErrVolumeNotFound) {
		t.Errorf("a volume that does not exist: %v, want NOT_FOUND", err)
	}
	var res v1alpha1.LogicalVolumeGroupSnapshot
	if err := b.Client.Get(ctx, client.ObjectKey{Name: volume.GroupSnapshotName("twice")}, &res); err != nil || res.Status.Phase != v1alpha1.PhaseFailed {
		t.Errorf("the refused group's status: %+v, %v", res.Status, err)
	}
}
