package backend

import (
	"testing"

	"google.golang.org/grpc/codes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// TestModifyThroughResources: ModifyVolume writes spec.type.mirrors and
// returns once the agent converted the LV; the same call again is
// answered without a change; legs the node cannot place come back with
// the agent's code; a thin volume is refused before its resource changes.
func TestModifyThroughResources(t *testing.T) {
	b, f := clusterWith(t, func(_ *lvmvol.Manager, f *lvmfake.LVM) { f.SetPVCount("vg0", 2) })
	ctx := within(t)
	vol, err := b.CreateVolume(ctx, req("pvc-1", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	one, two := 1, 2
	if _, err := b.ModifyVolume(ctx, vol.ID, volume.Mutable{Mirrors: &one}); err != nil {
		t.Fatal(err)
	}
	all, _ := f.ListAllLVs(ctx, "vg0")
	var lv v1alpha1.LogicalVolume
	if err := b.Client.Get(ctx, client.ObjectKey{Name: "pvc-1"}, &lv); err != nil {
		t.Fatal(err)
	}
	if lvm.Mirrors(all, "pvc-1") != 1 || lv.Spec.Type.Mirrors != 1 || lv.Status.Mirrors != 1 {
		t.Fatalf("after modify: %d mirrors in LVM, spec %d, status %d", lvm.Mirrors(all, "pvc-1"), lv.Spec.Type.Mirrors, lv.Status.Mirrors)
	}
	gen := lv.Generation
	if _, err := b.ModifyVolume(ctx, vol.ID, volume.Mutable{Mirrors: &one}); err != nil {
		t.Fatal(err)
	}
	if err := b.Client.Get(ctx, client.ObjectKey{Name: "pvc-1"}, &lv); err != nil || lv.Generation != gen {
		t.Errorf("the same modify again changed the resource: generation %d, was %d (%v)", lv.Generation, gen, err)
	}
	_, err = b.ModifyVolume(ctx, vol.ID, volume.Mutable{Mirrors: &two})
	wantCode(t, "3 legs on 2 PVs", volume.Status(err), codes.ResourceExhausted)
	_, err = b.ModifyVolume(ctx, volume.ID{Node: "node-a", VG: "vg0", LV: "nope"}, volume.Mutable{Mirrors: &one})
	wantCode(t, "unknown volume", volume.Status(err), codes.NotFound)
	_, err = b.ModifyVolume(ctx, volume.ID{Node: "node-a", VG: "vg0", LV: "nope"}, volume.Mutable{})
	wantCode(t, "unknown volume, no change", volume.Status(err), codes.NotFound)

	f.PutThinPool("vg0", "pool", 40*mib, 0)
	thinReq := req("pvc-thin", 4*mib)
	thinReq.Type.ThinPool = "pool"
	thin, err := b.CreateVolume(ctx, thinReq)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.ModifyVolume(ctx, thin.ID, volume.Mutable{Mirrors: &one})
	wantCode(t, "legs for a thin volume", volume.Status(err), codes.InvalidArgument)
	if err := b.Client.Get(ctx, client.ObjectKey{Name: "pvc-thin"}, &lv); err != nil || lv.Spec.Type.Mirrors != 0 {
		t.Errorf("refused modify changed the spec: %+v (%v)", lv.Spec.Type, err)
	}
}
