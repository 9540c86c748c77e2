package backend

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// The claim a CreateVolume names (csi-provisioner's metadata) is recorded
// on the resource with its UID, for the agent's events; a retry naming
// another, or none, is the same volume and changes nothing; a claim that
// cannot be read is no reason to fail, and none is recorded. The same for
// a snapshot whose VolumeSnapshot cannot be read (this API server has no
// such kind).
func TestRequesterRecorded(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	pvc, _ := server.Claim(t, "tenant-b", "data")
	claim := &volume.Requester{Kind: volume.RequesterClaim, Namespace: "tenant-b", Name: "data"}
	vol, err := b.CreateVolume(volume.WithRequester(ctx, claim), req("pvc-1", 4*mib))
	if err != nil {
		t.Fatal(err)
	}
	want := v1alpha1.Requester{APIVersion: "v1", Kind: volume.RequesterClaim, Namespace: "tenant-b", Name: "data", UID: string(pvc.UID)}
	requesterIs(t, b, "pvc-1", &want)
	other := &volume.Requester{Kind: volume.RequesterClaim, Namespace: "tenant-b", Name: "other"}
	for _, r := range []*volume.Requester{other, nil} {
		if again, err := b.CreateVolume(volume.WithRequester(ctx, r), req("pvc-1", 4*mib)); err != nil || again.ID != vol.ID {
			t.Errorf("retry naming %+v: %+v, %v", r, again, err)
		}
	}
	requesterIs(t, b, "pvc-1", &want)

	if _, err := b.CreateVolume(volume.WithRequester(ctx, other), req("pvc-2", 4*mib)); err != nil {
		t.Fatalf("a claim that cannot be read failed the call: %v", err)
	}
	requesterIs(t, b, "pvc-2", nil)

	snapReq := &volume.Requester{Kind: volume.RequesterSnapshot, Namespace: "tenant-b", Name: "snap"}
	src, snap := thinSnapshot(volume.WithRequester(ctx, snapReq), t, b, f)
	var s v1alpha1.LogicalVolumeSnapshot
	if err := b.Client.Get(ctx, types.NamespacedName{Name: volume.SnapshotLVName("snapshot-1")}, &s); err != nil || s.Spec.Requester != nil {
		t.Errorf("snapshot resource's requester %+v (%v), want none", s.Spec.Requester, err)
	}
	if again, err := b.CreateSnapshot(ctx, "snapshot-1", src.ID); err != nil || again.ID != snap.ID {
		t.Errorf("snapshot retry: %+v, %v", again, err)
	}
}

func requesterIs(t *testing.T, b *Backend, name string, want *v1alpha1.Requester) {
	t.Helper()
	var lv v1alpha1.LogicalVolume
	if err := b.Client.Get(context.Background(), types.NamespacedName{Name: volume.LVName(name)}, &lv); err != nil {
		t.Fatal(err)
	}
	if (want == nil) != (lv.Spec.Requester == nil) || want != nil && *want != *lv.Spec.Requester {
		t.Errorf("%s: requester %+v, want %+v", name, lv.Spec.Requester, want)
	}
}
