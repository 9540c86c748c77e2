//go:build vmtest

package faults

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

// hasHealth tells whether health entries hold one of status and reason.
func hasHealth(hs []*csi.VolumeHealth_VolumeHealthEntry, s csi.VolumeHealthErrorType, reason string) bool {
	for _, h := range hs {
		if h.GetStatus() == s && h.GetReason() == reason {
			return true
		}
	}
	return false
}

// TestVanishedPV: the disk under a mounted volume's PV vanishes (its dm
// device removed), so lvm2 reads the VG with that PV missing. Synced
// writes fail; the volume's health is INACCESSIBLE (MissingPhysicalVolume)
// and the storage's MissingPhysicalVolume; the volume is still known
// (ControllerGetVolume, NodeGetVolumeStats are not NOT_FOUND); a create, a
// snapshot and a delete are UNAVAILABLE and change nothing, so that lvm2
// never records the PV missing: when the device comes back the VG is
// whole again without an administrator, the volume stages with its data,
// and the create and delete go through. Then both disks vanish: the VG
// cannot be read, and every call about the volume is UNAVAILABLE, never
// NOT_FOUND (which would tell the CO the volume is gone), until they are
// back.
func TestVanishedPV(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	v := e.create("lin", 16*mib, nil)
	other := e.create("other", 16*mib, nil)
	target, data := e.upWithData(v, "lin")
	p, _, _ := e.extentsOf("lin")
	if q, _, _ := e.extentsOf("other"); q != p {
		t.Fatalf("volumes on %s and %s: the scenario wants them on one PV", p.name, q.name)
	}

	p.vanish()
	if err := testenv.WriteSynced(filepath.Join(target, "b"), randomBytes(4*mib)); err == nil {
		t.Error("a synced write to a vanished disk succeeded")
	}
	hs := e.volumeHealth(v.ID)
	t.Logf("volume health with its PV gone: %v", hs)
	if !hasHealth(hs, csi.VolumeHealthErrorType_INACCESSIBLE, "MissingPhysicalVolume") {
		t.Error("a volume whose PV vanished is not INACCESSIBLE (MissingPhysicalVolume)")
	}
	nh, err := e.c.Node.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: v.ID})
	must(t, err)
	if !hasHealth(nh.GetVolumeHealth().GetHealthStatuses(), csi.VolumeHealthErrorType_INACCESSIBLE, "MissingPhysicalVolume") {
		t.Errorf("node volume health with its PV gone: %v", nh.GetVolumeHealth().GetHealthStatuses())
	}
	sh, err := e.c.Node.NodeGetStorageHealth(ctx, &csi.NodeGetStorageHealthRequest{})
	must(t, err)
	t.Logf("storage health with a PV gone: %v", sh.GetBackendHealth())
	var missing bool
	for _, b := range sh.GetBackendHealth() {
		missing = missing || b.GetReason() == "MissingPhysicalVolume"
	}
	if !missing {
		t.Error("the node's storage health does not report the missing PV")
	}
	if _, err := e.c.Controller.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: v.ID}); err != nil {
		t.Errorf("ControllerGetVolume with its PV gone: %v", err)
	}
	if _, err := e.c.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: v.ID, VolumePath: target}); status.Code(err) == codes.NotFound {
		t.Errorf("NodeGetVolumeStats with its PV gone: %v, a volume that exists", err)
	}
	_, err = e.c.Create(ctx, "during", 16*mib, nil, csiflow.MountCap(snw, "ext4"))
	t.Logf("CreateVolume with a PV gone: %v", err)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("CreateVolume with a PV gone: %v, want UNAVAILABLE", err)
	}
	_, err = e.c.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: other.ID})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("CreateSnapshot with a PV gone: %v, want UNAVAILABLE", err)
	}
	_, err = e.c.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: other.ID})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("DeleteVolume with a PV gone: %v, want UNAVAILABLE", err)
	}

	p.heal()
	vgNow, err := e.lvm.GetVG(ctx, vg)
	must(t, err)
	if vgNow.MissingPVCount != 0 || vgNow.Partial {
		t.Fatalf("the VG still misses %d PV(s) after the disk came back (attr %s): something wrote its metadata meanwhile, "+
			"and only vgextend --restoremissing would heal it", vgNow.MissingPVCount, vgNow.Attr)
	}
	for _, n := range []string{"during", "snap-snap", "snap-snap-frz"} {
		if e.lvExists(n) {
			t.Errorf("LV %s left by a call refused while the PV was gone", n)
		}
	}
	during := e.create("during", 16*mib, nil)
	must(t, during.Delete(ctx))
	must(t, other.Delete(ctx))
	again := e.restage(v, target, "lin2", data)

	for _, p := range e.pvs {
		p.vanish()
	}
	if hs := e.volumeHealth(v.ID); !hasHealth(hs, csi.VolumeHealthErrorType_INACCESSIBLE, "VolumeGroupUnreadable") {
		t.Errorf("volume health with every disk gone: %v, want INACCESSIBLE (VolumeGroupUnreadable)", hs)
	}
	for name, call := range map[string]func() error{
		"ControllerGetVolume": func() error {
			_, err := e.c.Controller.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: v.ID})
			return err
		},
		"DeleteVolume": func() error {
			_, err := e.c.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.ID})
			return err
		},
		"CreateVolume": func() error {
			_, err := e.c.Create(ctx, "during", 16*mib, nil, csiflow.MountCap(snw, "ext4"))
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.Unavailable {
			t.Errorf("%s with every disk gone: %v, want UNAVAILABLE", name, err)
		}
	}
	for _, p := range e.pvs {
		p.heal()
	}
	eventually(t, "healthy with the disks back", func() bool { return len(e.volumeHealth(v.ID)) == 0 })
	again = e.restage(v, again, "lin3", data)
	must(t, v.Down(ctx, again))
	must(t, v.Delete(ctx))
}
