package csi

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/test/lvmfake"
)

func TestSnapshotRPCs(t *testing.T) {
	f := lvmfake.New(200*mib, "vg0")
	f.PutThinPool("vg0", "pool", 100*mib, 0)
	c := serve(t, f, f)
	ctx := context.Background()
	thin := map[string]string{ParamThinPool: "pool"}
	vol, err := c.CreateVolume(ctx, createReq("pvc-1", 8*mib, thin))
	if err != nil {
		t.Fatal(err)
	}
	src := vol.GetVolume().GetVolumeId()
	_, err = c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "", SourceVolumeId: src})
	wantCode(t, "no name", err, codes.InvalidArgument)
	_, err = c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s1"})
	wantCode(t, "no source", err, codes.InvalidArgument)
	_, err = c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: "fake-vol-id"})
	wantCode(t, "foreign source", err, codes.NotFound)
	_, err = c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: src,
		Parameters: map[string]string{volume.ParamSnapshotName: "s1", volume.ParamSnapshotNamespace: "No_Namespace"}})
	wantCode(t, "a VolumeSnapshot namespace no namespace can have", err, codes.InvalidArgument)
	_, err = c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: src, Parameters: map[string]string{"x": "y"}})
	wantCode(t, "unknown parameter", err, codes.InvalidArgument)

	snap, err := c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: src})
	if err != nil {
		t.Fatal(err)
	}
	s := snap.GetSnapshot()
	if !s.GetReadyToUse() || s.GetSourceVolumeId() != src || s.GetSizeBytes() != 8*mib {
		t.Errorf("snapshot %v", s)
	}
	other, _ := c.CreateVolume(ctx, createReq("pvc-2", 8*mib, thin))
	_, err = c.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: other.GetVolume().GetVolumeId()})
	wantCode(t, "same name, other source", err, codes.AlreadyExists)

	for _, req := range []*csi.ListSnapshotsRequest{{}, {SnapshotId: s.GetSnapshotId()}, {SourceVolumeId: src}} {
		list, err := c.ListSnapshots(ctx, req)
		if err != nil || len(list.GetEntries()) != 1 {
			t.Errorf("ListSnapshots(%v) = %v, %v; want the one snapshot", req, list, err)
		}
	}
	if list, _ := c.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: "n/vg0/nope"}); len(list.GetEntries()) != 0 {
		t.Errorf("filter by a missing id listed %v", list.GetEntries())
	}

	restore := createReq("pvc-r", 16*mib, thin)
	restore.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: s.GetSnapshotId()}}}
	r, err := c.CreateVolume(ctx, restore)
	if err != nil {
		t.Fatal(err)
	}
	if r.GetVolume().GetContentSource().GetSnapshot().GetSnapshotId() != s.GetSnapshotId() || r.GetVolume().GetCapacityBytes() != 16*mib {
		t.Errorf("restored volume %v", r.GetVolume())
	}
	restore.Name = "pvc-r2"
	restore.VolumeContentSource.GetSnapshot().SnapshotId = "fake-snap"
	_, err = c.CreateVolume(ctx, restore)
	wantCode(t, "restore from a foreign snapshot id", err, codes.NotFound)

	exp, err := c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: src, CapacityRange: &csi.CapacityRange{RequiredBytes: 12 * mib}})
	if err != nil || exp.GetCapacityBytes() != 12*mib || !exp.GetNodeExpansionRequired() {
		t.Errorf("expand = %v, %v", exp, err)
	}
	_, err = c.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: src})
	wantCode(t, "expand without range", err, codes.InvalidArgument)

	for range 2 {
		if _, err := c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: s.GetSnapshotId()}); err != nil {
			t.Errorf("DeleteSnapshot: %v", err)
		}
	}
	_, err = c.GetSnapshot(ctx, &csi.GetSnapshotRequest{SnapshotId: s.GetSnapshotId()})
	wantCode(t, "get deleted snapshot", err, codes.NotFound)
}
