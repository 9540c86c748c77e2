//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// TestStaticVolumesAdopted: after a cluster loses its records of a
// volume (its claim, PersistentVolume and LogicalVolume gone, the LV left
// on its node, as after a cluster rebuild), a static PersistentVolume
// naming the LV by Carve's volume handle takes it over, data and all; an
// LV made by hand is refused until its administrator tags it
// carve.dev/import, and then serves its filesystem.
func TestStaticVolumesAdopted(t *testing.T) {
	t.Parallel()
	create(t, pvc("adopt-src", "carve-thick", "64Mi"))
	p := runPod(t, "adopt-src-1", "adopt-src")
	writeData(t, p, "greeting", "from the old cluster")
	pvName, node := boundClaim(t, "adopt-src").Spec.VolumeName, p.Spec.NodeName
	deletePod(t, "adopt-src-1")
	waitDetached(t, pvName, "after the first pod")
	forgetVolume(t, "adopt-src", pvName)
	if l, err := lvOn(node, pvName); err != nil || l == nil {
		t.Fatalf("LV %s after its records went: %+v, %v; want it kept", pvName, l, err)
	}

	create(t, staticPV("adopt-old", node+"/e2e/"+pvName, node))
	create(t, staticClaim("adopt-old"))
	p = runPod(t, "adopt-old-1", "adopt-old")
	if got := readData(t, p, "greeting"); got != "from the old cluster" {
		t.Errorf("the adopted volume reads %q", got)
	}
	wait(t, "the Adopted event", time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := events(ctx, pvName)
		return containsPrefix(evs, "Adopted: adopted LV "+node+"/e2e/"+pvName), err
	})

	// An LV made by hand, with a filesystem and a file.
	script := `set -e
lvcreate -q -y -L 32m -n handmade e2e >/dev/null
mkfs.ext4 -q /dev/e2e/handmade
d=$(mktemp -d); mount /dev/e2e/handmade $d; echo made by hand >$d/hello; umount $d; rmdir $d
lvchange -an e2e/handmade`
	if out, err := nodeVM(t, node).sh("bash", "-c", script); err != nil {
		t.Fatalf("make an LV by hand on %s: %v: %s", node, err, out)
	}
	create(t, staticPV("adopt-hand", node+"/e2e/handmade", node))
	create(t, staticClaim("adopt-hand"))
	create(t, pod("adopt-hand-1", "adopt-hand"))
	wait(t, "the attach refused for want of the import tag", 3*time.Minute, func(ctx context.Context) (bool, error) {
		va, err := volumeAttachment(ctx, "adopt-hand")
		return err == nil && va != nil && va.Status.AttachError != nil && strings.Contains(va.Status.AttachError.Message, "carve.dev/import"), err
	})
	if out, err := nodeVM(t, node).sh("lvchange", "--addtag", "carve.dev/import", "e2e/handmade"); err != nil {
		t.Fatalf("tag the LV for import: %v: %s", err, out)
	}
	p = waitRunning(t, "adopt-hand-1", 5*time.Minute)
	if got := readData(t, p, "hello"); got != "made by hand\n" {
		t.Errorf("the imported volume reads %q", got)
	}
	for _, n := range []string{"adopt-old", "adopt-hand"} {
		deletePod(t, n+"-1")
		deleteClaim(t, n)
	}
}

// forgetVolume drops every record of claim's volume pv and keeps its LV:
// the PV is retained and deleted, the LogicalVolume deleted without its
// finalizer (so no agent removes the LV), as a cluster rebuilt without
// them would be.
func forgetVolume(t *testing.T, claim, pv string) {
	t.Helper()
	ctx := context.Background()
	var v corev1.PersistentVolume
	if err := get(ctx, pv, &v); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(v.DeepCopy())
	v.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	if err := h.kc.Patch(ctx, &v, patch); err != nil {
		t.Fatal(err)
	}
	startClaimDelete(t, claim)
	wait(t, "PV "+pv+" released", 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := get(ctx, pv, &v)
		return err == nil && v.Status.Phase == corev1.VolumeReleased, err
	})
	if err := h.kc.Delete(ctx, &v); err != nil {
		t.Fatal(err)
	}
	var lv v1alpha1.LogicalVolume
	if err := h.kc.Get(ctx, client.ObjectKey{Name: pv}, &lv); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(lv.DeepCopy())
	lv.Finalizers = nil
	if err := h.kc.Patch(ctx, &lv, patch); err != nil {
		t.Fatal(err)
	}
	if err := h.kc.Delete(ctx, &lv); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	wait(t, "PV "+pv+" gone", time.Minute, func(ctx context.Context) (bool, error) {
		return gone(get(ctx, pv, &corev1.PersistentVolume{}))
	})
}

// staticPV is a PersistentVolume an administrator writes for an existing
// volume: Carve's driver, the volume handle, pinned to its node; deleted
// with its claim (its LV too, once Carve has adopted it).
func staticPV(name, handle, node string) *corev1.PersistentVolume {
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("32Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "",
			VolumeMode:                    &fs,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driverName, VolumeHandle: handle, FSType: "ext4"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: topologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
}

// staticClaim binds to the static PersistentVolume of its name.
func staticClaim(name string) *corev1.PersistentVolumeClaim {
	c := pvc(name, "", "32Mi") // "": no class, no provisioning
	c.Spec.VolumeName = name
	return c
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
