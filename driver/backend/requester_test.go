package backend

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// claimIn makes the claim ns/name and returns its UID.
func claimIn(t *testing.T, ns, name string) types.UID {
	t.Helper()
	cs, err := kubernetes.NewForConfig(server.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("4Mi")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().PersistentVolumeClaims(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return pvc.UID
}

// The claim a CreateVolume names (csi-provisioner's metadata) is recorded
// on the resource with its UID, for the agent's events; a retry naming
// another, or none, is the same volume and changes nothing; a claim that
// cannot be read is no reason to fail, and none is recorded. The same for
// a snapshot whose VolumeSnapshot cannot be read (this API server has no
// such kind).
func TestRequesterRecorded(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	uid := claimIn(t, "tenant-b", "data")
	claim := &volume.Requester{Kind: volume.RequesterClaim, Namespace: "tenant-b", Name: "data"}
	vol, err := b.CreateVolume(volume.WithRequester(ctx, claim), req("pvc-1", 4*mib))
	if err != nil {
		t.Fatal(err)
	}
	want := v1alpha1.Requester{APIVersion: "v1", Kind: volume.RequesterClaim, Namespace: "tenant-b", Name: "data", UID: string(uid)}
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
