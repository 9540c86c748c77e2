package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// FuzzCreateFromResource: a LogicalVolume's spec is input to the node (the
// API server checks only its schema). Whatever it holds, the agent either
// refuses it and leaves LVM as it was, or carves one valid LV in a served
// VG, at least as large as asked, inside the limit.
func FuzzCreateFromResource(f *testing.F) {
	f.Add("pvc-1", "vg0", int64(8<<20), int64(0), "", 0, 0, int64(0), "", "")
	f.Add("pvc-2", "vg0", int64(8<<20), int64(16<<20), "pool", 0, 0, int64(0), "", "")
	f.Add("a b/../c", "vg0", int64(-1), int64(-5), "", 2, 1, int64(-4096), "node-a/vg0/x", "volume")
	f.Add("pvc-3", "../vg0", int64(1), int64(1), "pool/../x", 1<<30, -1, int64(1)<<62, "n//", "snapshot")
	f.Fuzz(func(t *testing.T, name, vg string, required, limit int64, pool string, stripes, mirrors int, stripeSize int64,
		source, kind string) {
		spec := v1alpha1.LogicalVolumeSpec{Name: name, NodeName: node, VolumeGroup: vg, RequiredBytes: required,
			LimitBytes: limit, ParamsDigest: "d",
			Type: v1alpha1.VolumeType{ThinPool: pool, Stripes: stripes, StripeSize: stripeSize, Mirrors: mirrors}}
		if source != "" {
			spec.Source = &v1alpha1.ContentSource{Kind: kind, ID: source}
		}
		req, err := createRequest(spec)
		if err != nil {
			if !errors.Is(err, volume.ErrInvalidID) {
				t.Fatalf("spec %+v: %v", spec, err)
			}
			return
		}
		fake := lvmfake.New(100<<20, "vg0")
		fake.PutThinPool("vg0", "pool", 40<<20, 0)
		before := lvNames(t, fake)
		var vol volume.Volume
		done := make(chan struct{})
		go func() {
			defer close(done)
			m := lvmvol.NewManager(lvmvol.Config{LVM: fake, Wiper: fake, Node: node, VolumeGroups: []string{"vg0"}})
			vol, err = m.CreateVolume(context.Background(), req)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("spec %+v: CreateVolume did not return in 5 s", spec)
		}
		after := lvNames(t, fake)
		if err != nil {
			if len(after) != len(before) {
				t.Fatalf("spec %+v refused (%v) but LVM changed: %v -> %v", spec, err, before, after)
			}
			return
		}
		switch {
		case vol.ID.VG != "vg0" || vol.ID.Node != node:
			t.Fatalf("spec %+v: carved %s", spec, vol.ID)
		case lvm.ValidateLVName(vol.ID.LV) != nil:
			t.Fatalf("spec %+v: LV name %q", spec, vol.ID.LV)
		case vol.SizeBytes < required || (limit > 0 && vol.SizeBytes > limit):
			t.Fatalf("spec %+v: %d bytes", spec, vol.SizeBytes)
		case len(after) != len(before)+1:
			t.Fatalf("spec %+v: LVs %v -> %v", spec, before, after)
		}
	})
}

func lvNames(t *testing.T, f *lvmfake.LVM) []string {
	t.Helper()
	lvs, err := f.ListLVs(context.Background(), lvm.Fresh, "vg0")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range lvs {
		out = append(out, l.Name)
	}
	return out
}
