package backend

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// TestStaticVolumeIsAdopted: attaching a volume no LogicalVolume records
// (a static PersistentVolume after a cluster rebuild) makes its resource
// and the agent adopts the LV Carve made; an LV Carve did not make is
// refused unless tagged for import; a handle naming no LV is NOT_FOUND and
// leaves no resource behind.
func TestStaticVolumeIsAdopted(t *testing.T) {
	var m *lvmvol.Manager
	b, f := clusterWith(t, func(cfg *lvmvol.Config, f *lvmfake.LVM) { m = lvmvol.NewManager(*cfg) })
	ctx := within(t)
	made, err := m.CreateVolume(ctx, volume.CreateRequest{Name: "pvc-before", VG: "vg0", RequiredBytes: 8 * mib, ParamsDigest: "d"})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := b.PublishVolume(ctx, made.ID, "node-a")
	if err != nil || dev != "/dev/vg0/pvc-before" {
		t.Fatalf("attach of a volume no resource records: %q, %v", dev, err)
	}
	var lv v1alpha1.LogicalVolume
	if err := b.Client.Get(ctx, client.ObjectKey{Name: "pvc-before"}, &lv); err != nil || !lv.Spec.Adopted || lv.Status.VolumeID != made.ID.String() {
		t.Fatalf("adopted resource %+v, %v", lv, err)
	}

	f.Put(lvm.LV{Name: "by-hand", VGName: "vg0", Size: 4 * mib, Layout: "linear"})
	hand := volume.ID{Node: "node-a", VG: "vg0", LV: "by-hand"}
	_, err = b.PublishVolume(ctx, hand, "node-a")
	if code := volume.CodeOf(err); code != codes.FailedPrecondition {
		t.Errorf("attach of an LV not Carve's, untagged: %v (%v), want FAILED_PRECONDITION", code, err)
	}
	if err := f.AddTags(ctx, "vg0", "by-hand", lvmvol.TagImport); err != nil {
		t.Fatal(err)
	}
	// The CO retries; the refused attempt's resource is dropped meanwhile.
	for {
		_, err := b.PublishVolume(ctx, hand, "node-a")
		if err == nil {
			break
		}
		if volume.CodeOf(err) != codes.Aborted || ctx.Err() != nil {
			t.Fatalf("attach of an LV tagged for import: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if l, ok := f.LV("vg0", "by-hand"); !ok || !l.HasTag(lvmvol.TagVolume) {
		t.Errorf("the imported LV: %+v, %v; want it there, Carve's", l, ok)
	}

	_, err = b.PublishVolume(ctx, volume.ID{Node: "node-a", VG: "vg0", LV: "pvc-never"}, "node-a")
	if code := volume.CodeOf(err); code != codes.NotFound {
		t.Errorf("attach of a handle naming no LV: %v (%v), want NOT_FOUND", code, err)
	}
	if err := b.Client.Get(ctx, client.ObjectKey{Name: "pvc-never"}, &lv); err == nil && lv.DeletionTimestamp.IsZero() {
		t.Errorf("the failed adoption's resource stays: %+v", lv.Spec)
	}
}
