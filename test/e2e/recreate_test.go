//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recreateClass asks for lost volumes to be recreated blank.
const recreateClass = "carve-recreate"

// TestLostVolumeRecreatedBlank loses two claims' LVs on their node
// behind Carve's back (lvremove, as after a disk was replaced and its VG
// made again): the claim whose class asks for it (recreateBlankWhenLost)
// gets its volume back, blank, with a RecreatedBlank event, and a pod on
// it runs on a new, empty filesystem; the claim of a class that does not
// ask gets a VolumeMissing event and no LV, and is never recreated.
func TestLostVolumeRecreatedBlank(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	create(t, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: recreateClass},
		Provisioner: driverName, Parameters: map[string]string{"csi.storage.k8s.io/fstype": "ext4", "recreateBlankWhenLost": "true"},
		VolumeBindingMode: new(storagev1.VolumeBindingWaitForFirstConsumer), ReclaimPolicy: new(corev1.PersistentVolumeReclaimDelete)})
	t.Cleanup(func() {
		_ = h.kc.Delete(context.Background(), &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: recreateClass}})
	})
	claims := map[string]string{"lost-asked": recreateClass, "lost-kept": "carve-thick"}
	pvs, nodes := map[string]string{}, map[string]string{}
	for claim, class := range claims {
		create(t, pvc(claim, class, "64Mi"))
		p := runPod(t, claim+"-1", claim)
		writeData(t, p, "greeting", "before the loss")
		pvs[claim], nodes[claim] = boundClaim(t, claim).Spec.VolumeName, p.Spec.NodeName
		deletePod(t, claim+"-1")
		waitDetached(t, pvs[claim], "after the first pod")
	}
	for claim, pv := range pvs {
		if out, err := nodeVM(t, nodes[claim]).sh("lvremove", "-q", "-y", "e2e/"+pv); err != nil {
			t.Fatalf("lose %s's LV on %s: %v: %s", claim, nodes[claim], err, out)
		}
	}

	asked, kept := pvs["lost-asked"], pvs["lost-kept"]
	wait(t, "the asked volume recreated blank", 4*time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := events(ctx, asked)
		return slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "RecreatedBlank: LV ") }), err
	})
	if l, err := lvOn(nodes["lost-asked"], asked); err != nil || l == nil {
		t.Fatalf("LV %s after its recreation: %+v, %v", asked, l, err)
	}
	p := runPod(t, "lost-asked-2", "lost-asked")
	if p.Spec.NodeName != nodes["lost-asked"] {
		t.Errorf("the recreated volume's pod runs on %s, its volume on %s", p.Spec.NodeName, nodes["lost-asked"])
	}
	if out, err := inContainerErr(t, p, "cat", "/data/greeting"); err == nil {
		t.Errorf("the recreated volume holds the lost data %q; want a blank filesystem", out)
	}
	writeData(t, p, "greeting", "after the loss")
	if got := readData(t, p, "greeting"); got != "after the loss" {
		t.Errorf("the recreated volume reads %q", got)
	}

	// The class that does not ask: reported, never recreated.
	wait(t, "the kept volume reported missing", 4*time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := events(ctx, kept)
		return slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "VolumeMissing: LV e2e/"+kept+" is gone") }), err
	})
	if l, err := lvOn(nodes["lost-kept"], kept); err != nil || l != nil {
		t.Errorf("LV %s of a class that does not ask was recreated: %+v, %v", kept, l, err)
	}
	if evs, err := events(ctx, kept); err != nil || slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "RecreatedBlank") }) {
		t.Errorf("events of the kept volume %q, %v: want no RecreatedBlank", evs, err)
	}
	deletePod(t, "lost-asked-2")
	deleteClaim(t, "lost-asked")
	deleteClaim(t, "lost-kept")
}
