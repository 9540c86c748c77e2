package backend

import (
	"context"
	"fmt"
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
	b, f, ctx, vol := twoPVVolume(t)
	var err error
	one, two := 1, 2
	if _, err := b.ModifyVolume(ctx, vol.ID, volume.Mutable{Mirrors: &one}); err != nil {
		t.Fatal(err)
	}
	all, _ := f.ListAllLVs(ctx, lvm.Fresh, "vg0")
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

	thin := thinVolume(ctx, t, b, f)
	_, err = b.ModifyVolume(ctx, thin.ID, volume.Mutable{Mirrors: &one})
	wantCode(t, "legs for a thin volume", volume.Status(err), codes.InvalidArgument)
	if err := b.Client.Get(ctx, client.ObjectKey{Name: "pvc-thin"}, &lv); err != nil || lv.Spec.Type.Mirrors != 0 {
		t.Errorf("refused modify changed the spec: %+v (%v)", lv.Spec.Type, err)
	}
}

// TestModifyLimitsThroughResources: a volume created with IO limits has
// them in its spec, its status and its LV's tags; ModifyVolume changes the
// ones it names (spec.ioLimits), and returns once the agent recorded them
// (status.ioLimits) and had the node apply them; the same call again
// changes no resource; a node that cannot apply them answers its code.
func TestModifyLimitsThroughResources(t *testing.T) {
	var applied []volume.ID
	fail := false
	b, f := clusterWith(t, func(cfg *lvmvol.Config, _ *lvmfake.LVM) {
		cfg.ApplyLimits = func(_ context.Context, id volume.ID) error {
			if fail {
				return fmt.Errorf("%w: no cgroup of the pod", volume.ErrFailedPrecondition)
			}
			applied = append(applied, id)
			return nil
		}
	})
	ctx := within(t)
	r := req("pvc-1", 8*mib)
	r.Limits = volume.IOLimits{ReadIOPS: 100}
	vol, err := b.CreateVolume(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishVolume(ctx, vol.ID, vol.ID.Node); err != nil {
		t.Fatal(err)
	}
	wbps := uint64(4 << 20)
	if _, err := b.ModifyVolume(ctx, vol.ID, volume.Mutable{WriteBPS: &wbps}); err != nil {
		t.Fatal(err)
	}
	var lv v1alpha1.LogicalVolume
	if err := b.Client.Get(ctx, client.ObjectKey{Name: "pvc-1"}, &lv); err != nil {
		t.Fatal(err)
	}
	want := v1alpha1.IOLimits{ReadIOPS: 100, WriteBytesPerSecond: 4 << 20}
	got, _ := f.LV("vg0", "pvc-1")
	if lv.Spec.IOLimits != want || lv.Status.IOLimits != want || !got.HasTag("carve.dev/riops=100") || !got.HasTag("carve.dev/wbps=4194304") {
		t.Errorf("after modify: spec %+v, status %+v, tags %v; want %+v", lv.Spec.IOLimits, lv.Status.IOLimits, got.Tags, want)
	}
	if len(applied) != 1 || applied[0] != vol.ID {
		t.Errorf("applied to %v, want %v once", applied, vol.ID)
	}
	gen := lv.Generation
	if _, err := b.ModifyVolume(ctx, vol.ID, volume.Mutable{WriteBPS: &wbps}); err != nil {
		t.Fatal(err)
	}
	if err := b.Client.Get(ctx, client.ObjectKey{Name: "pvc-1"}, &lv); err != nil || lv.Generation != gen {
		t.Errorf("the same modify again changed the resource: generation %d, was %d (%v)", lv.Generation, gen, err)
	}
	fail = true
	zero := uint64(0)
	_, err = b.ModifyVolume(ctx, vol.ID, volume.Mutable{WriteBPS: &zero})
	wantCode(t, "limits the node cannot apply", volume.Status(err), codes.FailedPrecondition)
}

// TestModifyWriteCacheThroughResources: ModifyVolume writes
// spec.writeCache and returns once the agent attached the cache
// (status.writeCache); size 0 detaches it; a thin volume, and legs for a
// cached volume, are refused before the resource changes; a cache the
// node cannot place comes back with the agent's code.
func TestModifyWriteCacheThroughResources(t *testing.T) {
	b, f, ctx, vol := twoPVVolume(t)
	var err error
	cache := &volume.WriteCache{Size: 4 * mib, On: []string{"@fast"}}
	if _, err := b.ModifyVolume(ctx, vol.ID, volume.Mutable{WriteCache: cache}); err != nil {
		t.Fatal(err)
	}
	get := func(name string) v1alpha1.LogicalVolume {
		var lv v1alpha1.LogicalVolume
		if err := b.Client.Get(ctx, client.ObjectKey{Name: name}, &lv); err != nil {
			t.Fatal(err)
		}
		return lv
	}
	lv := get("pvc-1")
	all, _ := f.ListAllLVs(ctx, lvm.Fresh, "vg0")
	want := &v1alpha1.WriteCache{SizeBytes: 4 * mib, PVs: []string{"@fast"}}
	if cv, ok := lvm.AttachedCacheVol(all, "pvc-1"); !ok || cv.Size != 4*mib || !lv.Spec.WriteCache.Same(want) || !lv.Status.WriteCache.Same(want) {
		t.Fatalf("after modify: cache %+v (%v), spec %+v, status %+v", cv, ok, lv.Spec.WriteCache, lv.Status.WriteCache)
	}
	one := 1
	_, err = b.ModifyVolume(ctx, vol.ID, volume.Mutable{Mirrors: &one})
	wantCode(t, "legs for a cached volume", volume.Status(err), codes.InvalidArgument)
	if _, err := b.ModifyVolume(ctx, vol.ID, volume.Mutable{WriteCache: &volume.WriteCache{}}); err != nil {
		t.Fatal(err)
	}
	lv = get("pvc-1")
	all, _ = f.ListAllLVs(ctx, lvm.Fresh, "vg0")
	if _, ok := lvm.AttachedCacheVol(all, "pvc-1"); ok || lv.Spec.WriteCache != nil || lv.Status.WriteCache != nil {
		t.Fatalf("after detach: attached %v, spec %+v, status %+v", ok, lv.Spec.WriteCache, lv.Status.WriteCache)
	}
	_, err = b.ModifyVolume(ctx, vol.ID, volume.Mutable{WriteCache: &volume.WriteCache{Size: 1 << 30, On: []string{"@fast"}}})
	wantCode(t, "a cache larger than the VG", volume.Status(err), codes.ResourceExhausted)

	thin := thinVolume(ctx, t, b, f)
	_, err = b.ModifyVolume(ctx, thin.ID, volume.Mutable{WriteCache: cache})
	wantCode(t, "a cache for a thin volume", volume.Status(err), codes.InvalidArgument)
	if lv := get("pvc-thin"); lv.Spec.WriteCache != nil {
		t.Errorf("refused modify changed the spec: %+v", lv.Spec.WriteCache)
	}
}

// thinVolume creates pvc-thin in a new thin pool of vg0.
func thinVolume(ctx context.Context, t *testing.T, b *Backend, f *lvmfake.LVM) volume.Volume {
	t.Helper()
	f.PutThinPool("vg0", "pool", 40*mib, 0)
	r := req("pvc-thin", 4*mib)
	r.Type.ThinPool = "pool"
	thin, err := b.CreateVolume(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	return thin
}

// twoPVVolume is a cluster on a VG of two PVs with pvc-1 of 8 MiB in it.
func twoPVVolume(t *testing.T) (*Backend, *lvmfake.LVM, context.Context, volume.Volume) {
	t.Helper()
	b, f := clusterWith(t, func(_ *lvmvol.Config, f *lvmfake.LVM) { f.SetPVCount("vg0", 2) })
	ctx := within(t)
	vol, err := b.CreateVolume(ctx, req("pvc-1", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	return b, f, ctx, vol
}
