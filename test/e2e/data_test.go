//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const mi = 1 << 20

// Scenario 4: PVC resize while the pod runs. The PV and PVC report the new
// size; the LV and the filesystem grew; the data is still there.
func TestResize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	create(t, pvc("grow", "carve-thick", "256Mi"))
	p := runPod(t, "grow-1", "grow")
	claim := boundClaim(t, "grow")
	pvName := claim.Spec.VolumeName
	before := fsSize(t, p)
	writeData(t, p, "keep", "kept across resize")

	patch := client.MergeFrom(claim.DeepCopy())
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("512Mi")
	if err := h.kc.Patch(ctx, claim, patch); err != nil {
		t.Fatal(err)
	}
	want := resource.MustParse("512Mi")
	var state string
	err := h.waitFor("PVC and PV at 512Mi", 4*time.Minute, func(ctx context.Context) (bool, error) {
		var c corev1.PersistentVolumeClaim
		var pv corev1.PersistentVolume
		if err := get(ctx, "grow", &c); err != nil {
			return false, err
		}
		if err := get(ctx, pvName, &pv); err != nil {
			return false, err
		}
		got := c.Status.Capacity[corev1.ResourceStorage]
		pvGot := pv.Spec.Capacity[corev1.ResourceStorage]
		state = fmt.Sprintf("PVC capacity %s, conditions %+v; PV capacity %s", got.String(), c.Status.Conditions, pvGot.String())
		for _, cond := range c.Status.Conditions {
			if cond.Type == corev1.PersistentVolumeClaimFileSystemResizePending || cond.Type == corev1.PersistentVolumeClaimResizing {
				return false, nil
			}
		}
		return got.Cmp(want) >= 0 && pvGot.Cmp(want) >= 0, nil
	})
	if err != nil {
		t.Fatalf("%v: %s", err, state)
	}
	l, err := lvInfo(pvName)
	if err != nil || l == nil || l.bytes() < 512*mi {
		t.Errorf("LV %s after resize: %+v, %v", pvName, l, err)
	}
	// kubelet grows the mounted filesystem (NodeExpandVolume) online.
	wait(t, "filesystem grown", 2*time.Minute, func(context.Context) (bool, error) {
		return fsSize(t, p) > before+200*mi, nil
	})
	if got := readData(t, p, "keep"); got != "kept across resize" {
		t.Errorf("after resize the file holds %q", got)
	}
	deletePod(t, "grow-1")
	deleteClaim(t, "grow")
}

// Scenario 5: VolumeSnapshot -> readyToUse; a new, larger PVC from it has
// the snapshot's data, not what was written after. Thick volumes are
// copied; thin ones get thin snapshots.
func TestSnapshotRestore(t *testing.T) {
	t.Parallel()
	thickAndThin(t, snapshotRestore)
}

// thickAndThin runs scenario for the e2e's thick and thin classes, a
// parallel subtest each.
func thickAndThin(t *testing.T, scenario func(t *testing.T, class string)) {
	for _, class := range []string{"carve-thick", "carve-thin"} {
		t.Run(class, func(t *testing.T) { t.Parallel(); scenario(t, class) })
	}
}

func snapshotRestore(t *testing.T, class string) {
	src, snap, dst := class+"-src", class+"-snap", class+"-restored"
	create(t, pvc(src, class, "256Mi"))
	p := runPod(t, src+"-1", src)
	writeData(t, p, "state", "before the snapshot")

	vs := takeSnapshot(t, snap, src)
	writeData(t, p, "state", "after the snapshot")

	restored := restoreClaim(dst, class, "384Mi", snap)
	create(t, restored)
	p2 := runPodWith(t, dst+"-1", dst, onNode(p.Spec.NodeName))
	if got := readData(t, p2, "state"); got != "before the snapshot" {
		t.Errorf("restored volume holds %q", got)
	}
	// Its tenant, with rights in the namespace only, reads what the
	// node agent did for the snapshot and the restored claim.
	tenantSees(t, vs, "Created", "is ready")
	tenantSees(t, restored, "Created", "created LV")
	tenantCannotReadResources(t)
	if got := fsSize(t, p2); got < 300*mi {
		t.Errorf("restored filesystem is %d bytes; the claim asked for 384Mi", got)
	}

	deleteRestore(t, src, dst, vs)
	wait(t, "snapshot LVs removed", 2*time.Minute, func(context.Context) (bool, error) {
		return snapshotLVsGone(p.Spec.NodeName)
	})
}

// snapshotLVsGone tells whether VM node node holds no snapshot LV.
func snapshotLVsGone(node string) (bool, error) {
	lvs, err := listLVs(node)
	for _, l := range lvs {
		if strings.HasPrefix(l.Name, "snap-") {
			return false, err
		}
	}
	return err == nil, err
}

// deleteRestore deletes a restore's pod and claim (dst), then its
// source's (src) and the snapshot vs between them, each pod named for
// its claim with "-1".
func deleteRestore(t *testing.T, src, dst string, vs *unstructured.Unstructured) {
	t.Helper()
	deletePod(t, dst+"-1")
	deletePod(t, src+"-1")
	deleteSnapshot(t, vs)
	deleteClaim(t, dst)
	deleteClaim(t, src)
}

// takeSnapshot makes VolumeSnapshot snap of claim src and waits until it
// is ready to use.
func takeSnapshot(t *testing.T, snap, src string) *unstructured.Unstructured {
	t.Helper()
	vs := volumeSnapshot(snap, src)
	if err := h.kc.Create(context.Background(), vs); err != nil {
		t.Fatal(err)
	}
	waitSnapshotReady(t, vs)
	return vs
}

// restoreClaim is a claim of class restored from VolumeSnapshot snap.
func restoreClaim(name, class, size, snap string) *corev1.PersistentVolumeClaim {
	c := pvc(name, class, size)
	group := "snapshot.storage.k8s.io"
	c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: snap}
	return c
}

// deleteSnapshot deletes vs and waits until it is gone.
func deleteSnapshot(t *testing.T, vs *unstructured.Unstructured) {
	t.Helper()
	if err := h.kc.Delete(context.Background(), vs); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: testNS, Name: vs.GetName()}
	wait(t, "VolumeSnapshot gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		return gone(h.kc.Get(ctx, key, volumeSnapshot(vs.GetName(), "")))
	})
}

func volumeSnapshot(name, claim string) *unstructured.Unstructured {
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1",
		"kind":       "VolumeSnapshot",
		"metadata":   map[string]any{"name": name, "namespace": testNS},
		"spec": map[string]any{
			"volumeSnapshotClassName": "carve",
			"source":                  map[string]any{"persistentVolumeClaimName": claim},
		},
	}}
	return vs
}

// waitSnapshotReady waits until VolumeSnapshot vs is ready to use.
func waitSnapshotReady(t *testing.T, vs *unstructured.Unstructured) {
	t.Helper()
	wait(t, "VolumeSnapshot "+vs.GetName()+" readyToUse", 6*time.Minute, func(ctx context.Context) (bool, error) {
		if err := h.kc.Get(ctx, types.NamespacedName{Namespace: testNS, Name: vs.GetName()}, vs); err != nil {
			return false, err
		}
		ready, _, _ := unstructured.NestedBool(vs.Object, "status", "readyToUse")
		return ready, nil
	})
}

// waitSnapshotError waits until VolumeSnapshot vs reports an error whose
// message holds code.
func waitSnapshotError(t *testing.T, vs *unstructured.Unstructured, code string) {
	t.Helper()
	wait(t, "VolumeSnapshot "+vs.GetName()+" failing with "+code, 4*time.Minute, func(ctx context.Context) (bool, error) {
		if err := h.kc.Get(ctx, types.NamespacedName{Namespace: testNS, Name: vs.GetName()}, vs); err != nil {
			return false, err
		}
		if ready, _, _ := unstructured.NestedBool(vs.Object, "status", "readyToUse"); ready {
			return false, fmt.Errorf("VolumeSnapshot %s is ready in a full pool", vs.GetName())
		}
		msg, _, _ := unstructured.NestedString(vs.Object, "status", "error", "message")
		if msg != "" {
			t.Logf("VolumeSnapshot %s: %s", vs.GetName(), msg)
		}
		return strings.Contains(msg, code), nil
	})
}
