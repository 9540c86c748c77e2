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
// the copy's time and the downtime (cutOverTime to movedTime); the
// figure for a larger claim is TestMoveBench's.
func TestMoveToTheOtherNode(t *testing.T) {
	t.Parallel()
	thickAndThin(t, func(t *testing.T, class string) {
		moveClaim(t, moveCase{name: "moved", class: class, size: "256Mi", firstMiB: 64, secondMiB: 7})
	})
}

// moveCase is one move of moveClaim: a claim class-name of class and size, firstMiB
// written before the move, secondMiB more written while the first copy
// runs (duringCopy) or at ReadyToCutOver.
type moveCase struct {
	name, class, size   string
	firstMiB, secondMiB int
	duringCopy          bool
}

// moveFigures are a move's times: its first copy (the move's creation to
// ReadyToCutOver, the pod running) and its downtime (cutOverTime to
// movedTime: the catch-up and the swap).
type moveFigures struct {
	Class           string  `json:"class"`
	Size            string  `json:"size"`
	FirstMiB        int     `json:"first_mib"`
	SecondMiB       int     `json:"second_mib"`
	CopySeconds     float64 `json:"first_copy_seconds"`
	DowntimeSeconds float64 `json:"downtime_seconds"`
}

// moveClaim runs c's move from carve-vm to carve-vm2 and checks it (see
// TestMoveToTheOtherNode); it returns the move's times.
func moveClaim(t *testing.T, c moveCase) moveFigures {
	claim := c.class + "-" + c.name
	create(t, pvc(claim, c.class, c.size))
	p := runPodWith(t, claim+"-1", claim, onNode(vmNode))
	oldPV := boundClaim(t, claim).Spec.VolumeName
	first := writeBlob(t, p, "first", c.firstMiB)

	m := &v1alpha1.VolumeMove{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: claim + "-to-vm2"},
		Spec: v1alpha1.VolumeMoveSpec{Claim: claim, ToNode: vmNode2}}
	create(t, m)
	start := time.Now()
	var second string
	if c.duringCopy {
		second = writeDuringCopy(t, p, m, c.secondMiB)
	}
	awaitMove(t, m, v1alpha1.MoveReadyToCutOver, 30*time.Minute)
	copied := time.Since(start)
	t.Logf("%s copied to %s in %v (%d MiB written before)", claim, vmNode2, copied.Round(time.Second), c.firstMiB)
	if !c.duringCopy {
		second = writeBlob(t, p, "second", c.secondMiB)
	}
	deletePod(t, claim+"-1")
	moved := awaitMove(t, m, v1alpha1.MoveMoved, 30*time.Minute)
	down := moved.Status.MovedTime.Sub(moved.Status.CutOverTime.Time)
	t.Logf("%s moved: downtime %v (cutOverTime %s to movedTime %s, the catch-up of %d MiB and the swap)",
		claim, down, moved.Status.CutOverTime.Format(time.RFC3339), moved.Status.MovedTime.Format(time.RFC3339), c.secondMiB)

	p2 := runPodWith(t, claim+"-2", claim, func(*corev1.Pod) {})
	if p2.Spec.NodeName != vmNode2 {
		t.Errorf("the moved claim's pod runs on %s, not %s", p2.Spec.NodeName, vmNode2)
	}
	if got := blobSum(t, p2, "first"); got != first {
		t.Errorf("the moved claim holds a first file of digest %s; it was %s", got, first)
	}
	if got := blobSum(t, p2, "second"); got != second {
		t.Errorf("the moved claim holds a second file (written after the first snapshot) of digest %s; it was %s", got, second)
	}
	bound := boundClaim(t, claim)
	if bound.Spec.VolumeName != moved.Status.PersistentVolume || bound.Spec.VolumeName == oldPV {
		t.Errorf("claim %s is bound to %s; the move made %s", claim, bound.Spec.VolumeName, moved.Status.PersistentVolume)
	}
	tenantSeesMove(t, bound, "Moved")
	movedLeavesNothing(t, oldPV)

	deletePod(t, claim+"-2")
	deleteClaim(t, claim)
	if err := h.kc.Delete(context.Background(), m); client.IgnoreNotFound(err) != nil {
		t.Error(err)
	}
	return moveFigures{Class: c.class, Size: c.size, FirstMiB: c.firstMiB, SecondMiB: c.secondMiB,
		CopySeconds: copied.Seconds(), DowntimeSeconds: down.Seconds()}
}

// writeDuringCopy writes mib MiB to a second file once m's target is
// being made (its first snapshot taken, so the write is in the catch-up's
// delta), and fails the test if the first copy ended before the write
// did: the figure would not be the one asked for.
func writeDuringCopy(t *testing.T, p *corev1.Pod, m *v1alpha1.VolumeMove, mib int) string {
	t.Helper()
	var got v1alpha1.VolumeMove
	wait(t, "VolumeMove "+m.Name+"'s target being made", 10*time.Minute, func(ctx context.Context) (bool, error) {
		err := h.kc.Get(ctx, client.ObjectKeyFromObject(m), &got)
		return err == nil && got.Status.TargetVolumeID != "", err
	})
	sum := writeBlob(t, p, "second", mib)
	if err := h.kc.Get(context.Background(), client.ObjectKeyFromObject(m), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1alpha1.MoveCopy {
		t.Fatalf("VolumeMove %s reached %s before the %d MiB written during its copy were in", m.Name, got.Status.Phase, mib)
	}
	return sum
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
