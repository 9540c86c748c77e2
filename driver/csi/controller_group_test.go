package csi

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/test/lvmfake"
)

// TestGroupSnapshotOverGRPC: a standalone controller serves the
// GroupController and advertises it; a group of two volumes is made and
// read back; snapshot IDs that are not the group's are INVALID_ARGUMENT
// and delete nothing; the group goes whole; its members name it.
func TestGroupSnapshotOverGRPC(t *testing.T) {
	ctx := context.Background()
	f := lvmfake.New(64<<20, "vg0")
	f.PutThinPool("vg0", "pool", 32<<20, 0) // thin members: no copy (the thick path is lvmvol's tests')
	conn := serveConn(t, f, f)
	ctrl, group, id := csi.NewControllerClient(conn), csi.NewGroupControllerClient(conn), csi.NewIdentityClient(conn)

	caps, err := id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	advertised := false
	for _, c := range caps.GetCapabilities() {
		advertised = advertised || c.GetService().GetType() == csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE
	}
	if !advertised {
		t.Fatal("GROUP_CONTROLLER_SERVICE not advertised")
	}
	var ids []string
	for _, name := range []string{"pvc-a", "pvc-b"} {
		v, err := ctrl.CreateVolume(ctx, createReq(name, 4<<20, map[string]string{"thinPool": "pool"}))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.GetVolume().GetVolumeId())
	}
	_, err = group.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{SourceVolumeIds: ids})
	wantCode(t, "no name", err, codes.InvalidArgument)
	_, err = group.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{ids[0], "node-b/vg0/pvc-x"}})
	wantCode(t, "volumes of two nodes", err, codes.FailedPrecondition)

	resp, err := group.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: ids})
	if err != nil {
		t.Fatal(err)
	}
	g := resp.GetGroupSnapshot()
	if len(g.GetSnapshots()) != 2 || g.GetCreationTime() == nil || !g.GetReadyToUse() {
		t.Fatalf("group %v", g)
	}
	member := g.GetSnapshots()[0]
	got, err := ctrl.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: member.GetSnapshotId()})
	if err != nil || got.GetSnapshot().GetGroupSnapshotId() != g.GetGroupSnapshotId() {
		t.Fatalf("member %v, %v: does not name its group %s", got, err, g.GetGroupSnapshotId())
	}
	_, err = ctrl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: member.GetSnapshotId()})
	wantCode(t, "delete a member alone", err, codes.InvalidArgument)
	_, err = group.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: g.GetGroupSnapshotId(), SnapshotIds: []string{member.GetSnapshotId()}})
	wantCode(t, "delete with a wrong member list", err, codes.InvalidArgument)
	if _, err := group.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: g.GetGroupSnapshotId()}); err != nil {
		t.Fatalf("the group after a refused delete: %v", err)
	}
	if _, err := group.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: g.GetGroupSnapshotId()}); err != nil {
		t.Fatal(err)
	}
	_, err = group.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: g.GetGroupSnapshotId()})
	wantCode(t, "get a deleted group", err, codes.NotFound)
}
