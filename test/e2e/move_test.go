//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// TestMoveToTheOtherNode (thick and thin): a claim in use by a pod on
// carve-vm is moved to carve-vm2 with a VolumeMove. The pod writes 64
// MiB of random bytes and keeps running through the copy; at
// ReadyToCutOver it writes 10 % more, and is deleted (the user stopping
// the workload); the move catches up with what it wrote and swaps the
// claim, whose name stays, to a new PersistentVolume on carve-vm2. A new
// pod on the claim, pinned nowhere, is scheduled on carve-vm2 and reads
// both files byte for byte (MD5); the tenant reads the Moved event; the
// old LV and the move's snapshots are gone from carve-vm. The log gives
// the copy's time and the downtime (cutOverTime to movedTime).
func TestMoveToTheOtherNode(t *testing.T) {
	t.Parallel()
	thickAndThin(t, moveToTheOtherNode)
}

func moveToTheOtherNode(t *testing.T, class string) {
	claim := class + "-moved"
	create(t, pvc(claim, class, "256Mi"))
	p := runPodWith(t, claim+"-1", claim, onNode(vmNode))
	oldPV := boundClaim(t, claim).Spec.VolumeName
	first := writeBlob(t, p, "first", 64)

	m := &v1alpha1.VolumeMove{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: claim + "-to-vm2"},
		Spec: v1alpha1.VolumeMoveSpec{Claim: claim, ToNode: vmNode2}}
	create(t, m)
	start := time.Now()
	awaitMove(t, m, v1alpha1.MoveReadyToCutOver, 20*time.Minute)
	t.Logf("%s copied to %s in %v (64 MiB written)", claim, vmNode2, time.Since(start).Round(time.Second))
	second := writeBlob(t, p, "second", 7) // 10 % more while it waits
	deletePod(t, claim+"-1")
	moved := awaitMove(t, m, v1alpha1.MoveMoved, 15*time.Minute)
	down := moved.Status.MovedTime.Sub(moved.Status.CutOverTime.Time)
	t.Logf("%s moved: downtime %v (cutOverTime %s to movedTime %s, the catch-up of 7 MiB and the swap)",
		claim, down, moved.Status.CutOverTime.Format(time.RFC3339), moved.Status.MovedTime.Format(time.RFC3339))

	p2 := runPodWith(t, claim+"-2", claim, func(*corev1.Pod) {})
	if p2.Spec.NodeName != vmNode2 {
		t.Errorf("the moved claim's pod runs on %s, not %s", p2.Spec.NodeName, vmNode2)
	}
	if got := blobSum(t, p2, "first"); got != first {
		t.Errorf("the moved claim holds a first file of digest %s; it was %s", got, first)
	}
	if got := blobSum(t, p2, "second"); got != second {
		t.Errorf("the moved claim holds a second file (written at ReadyToCutOver) of digest %s; it was %s", got, second)
	}
	c := boundClaim(t, claim)
	if c.Spec.VolumeName != moved.Status.PersistentVolume || c.Spec.VolumeName == oldPV {
		t.Errorf("claim %s is bound to %s; the move made %s", claim, c.Spec.VolumeName, moved.Status.PersistentVolume)
	}
	tenantSeesMove(t, c, "Moved")
	movedLeavesNothing(t, oldPV)

	deletePod(t, claim+"-2")
	deleteClaim(t, claim)
	if err := h.kc.Delete(context.Background(), m); client.IgnoreNotFound(err) != nil {
		t.Error(err)
	}
}

// awaitMove waits until m reaches phase; a failed move fails the test
// with its message.
func awaitMove(t *testing.T, m *v1alpha1.VolumeMove, phase v1alpha1.MovePhase, timeout time.Duration) *v1alpha1.VolumeMove {
	t.Helper()
	var got v1alpha1.VolumeMove
	wait(t, fmt.Sprintf("VolumeMove %s %s", m.Name, phase), timeout, func(ctx context.Context) (bool, error) {
		if err := h.kc.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
			return false, err
		}
		if got.Status.Phase == v1alpha1.MoveFailed {
			return false, fmt.Errorf("the move failed: %s", got.Status.Message)
		}
		return got.Status.Phase == phase, nil
	})
	t.Logf("VolumeMove %s: %s, %d%% copied (%s)", m.Name, got.Status.Phase, got.Status.CopiedPercent, got.Status.Message)
	return &got
}

// tenantSeesMove waits until the tenant reads carve controller's event
// of reason about obj.
func tenantSeesMove(t *testing.T, obj client.Object, reason string) {
	t.Helper()
	c := asTenant(t)
	wait(t, "the tenant reads the "+reason+" event about "+obj.GetName(), 2*time.Minute, func(ctx context.Context) (bool, error) {
		var list corev1.EventList
		err := c.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{"involvedObject.uid": string(obj.GetUID())})
		if apierrors.IsForbidden(err) {
			return false, nil // the RoleBinding is not in the authorizer's cache yet
		}
		for _, e := range list.Items {
			if e.Reason == reason && strings.Contains(e.Message, vmNode2) {
				t.Logf("the tenant reads about %s: %s: %s", obj.GetName(), reason, e.Message)
				return true, nil
			}
		}
		return false, err
	})
}

// movedLeavesNothing: the old volume's LV and the move's snapshots are
// gone from carve-vm, and the old PersistentVolume from the API.
func movedLeavesNothing(t *testing.T, oldPV string) {
	t.Helper()
	wait(t, "the moved volume and the move's snapshots removed from "+vmNode, 3*time.Minute, func(ctx context.Context) (bool, error) {
		if left, err := lvOn(vmNode, oldPV); left != nil || err != nil {
			return false, err
		}
		if gone, err := gone(get(ctx, oldPV, &corev1.PersistentVolume{})); !gone || err != nil {
			return false, err
		}
		return snapshotLVsGone(vmNode)
	})
}
