//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Scenarios 1-3: WaitForFirstConsumer provisioning on the scheduled node,
// attach through a VolumeAttachment, stage and publish by kubelet, data
// across two pods, and the way back in order.
func TestProvisionAttachStagePublish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	create(t, pvc("life", "carve-thick", "256Mi"))
	// WaitForFirstConsumer: nothing happens before a pod uses the claim.
	time.Sleep(3 * time.Second)
	var c corev1.PersistentVolumeClaim
	if err := get(ctx, "life", &c); err != nil {
		t.Fatal(err)
	}
	if c.Status.Phase != corev1.ClaimPending || c.Spec.VolumeName != "" {
		t.Fatalf("PVC of a WaitForFirstConsumer class without a pod: phase %s, volume %q", c.Status.Phase, c.Spec.VolumeName)
	}

	p1 := runPod(t, "life-1", "life")
	claim := boundClaim(t, "life")
	pvName := claim.Spec.VolumeName

	// 1. The scheduler picked a node with LVM; the PV is pinned to it;
	// the LV is on that node's VG, and on no other.
	node := p1.Spec.NodeName
	if got := claim.Annotations["volume.kubernetes.io/selected-node"]; got != node || !slices.Contains(lvmNodes(), node) {
		t.Errorf("selected-node %q, pod on %q; want one of %v", got, node, lvmNodes())
	}
	var pv corev1.PersistentVolume
	if err := get(ctx, pvName, &pv); err != nil {
		t.Fatal(err)
	}
	if !pinnedTo(&pv, node) {
		t.Errorf("PV %s node affinity %+v, want %s=%s", pvName, pv.Spec.NodeAffinity, topologyKey, node)
	}
	l, err := lvOn(node, pvName)
	if err != nil || l == nil {
		t.Fatalf("LV %s on %s's VG e2e: %+v, %v", pvName, node, l, err)
	}
	// The node agent tells what it did, on the LogicalVolume.
	wait(t, "the agent's Created and Published events", time.Minute, func(ctx context.Context) (bool, error) {
		evs, err := events(ctx, pvName)
		created, published := false, false
		for _, e := range evs {
			created = created || strings.HasPrefix(e, "Created: created LV "+node+"/e2e/"+pvName)
			published = published || strings.HasPrefix(e, "Published: activated LV")
		}
		return created && published, err
	})

	// 2. Attached through the VolumeAttachment: the LV is active and the
	// device is in the attachment metadata.
	va, err := volumeAttachment(ctx, pvName)
	if err != nil || va == nil {
		t.Fatalf("VolumeAttachment of %s: %v, %v", pvName, va, err)
	}
	if !va.Status.Attached || va.Spec.NodeName != node || va.Status.AttachmentMetadata["devicePath"] != "/dev/e2e/"+pvName {
		t.Errorf("VolumeAttachment %s: node %s, status %+v", va.Name, va.Spec.NodeName, va.Status)
	}
	if l.Active != "active" {
		t.Errorf("LV %s of an attached volume is %q", pvName, l.Active)
	}

	// 3. kubelet staged and published: data through the pod's mount.
	pub, stage := publishPath(p1, pvName), stagingPath(pv.Spec.CSI.VolumeHandle)
	for _, m := range []string{stage, pub} {
		if ok, err := mounted(node, m); !ok || err != nil {
			t.Fatalf("%s is not mounted on %s (%v)", m, node, err)
		}
	}
	writeData(t, p1, "greeting", "written by life-1")

	// Deleting the pod unpublishes, unstages and detaches, in that order.
	if err := h.kc.Delete(ctx, p1); err != nil {
		t.Fatal(err)
	}
	order := watchTeardown(node, pub, stage, pvName)
	if !slices.Equal(order, []string{"unpublished", "unstaged", "detached"}) {
		t.Errorf("teardown order %v, want unpublished, unstaged, detached", order)
	}
	if l, err := lvOn(node, pvName); err != nil || l == nil || l.Active != "" {
		t.Errorf("LV %s after detach: %+v, %v (want inactive)", pvName, l, err)
	}

	// A second pod on the same claim reads the data back.
	p2 := runPod(t, "life-2", "life")
	if got := readData(t, p2, "greeting"); got != "written by life-1" {
		t.Errorf("second pod reads %q", got)
	}
	deletePod(t, "life-2")
	deleteClaim(t, "life")
}

// watchTeardown records, twice a second, the order in which the publish
// mount, the staging mount and the VolumeAttachment go away. Steps seen in
// the same poll are listed in the expected order; a step seen before an
// earlier one shows in the order.
func watchTeardown(node, pub, stage, pv string) []string {
	var order []string
	seen := map[string]bool{}
	note := func(step string, ok bool) {
		if ok && !seen[step] {
			seen[step] = true
			order = append(order, step)
		}
	}
	deadline := time.Now().Add(4 * time.Minute)
	for len(order) < 3 && time.Now().Before(deadline) {
		pubM, err1 := mounted(node, pub)
		stageM, err2 := mounted(node, stage)
		va, err3 := volumeAttachment(context.Background(), pv)
		if err1 == nil && err2 == nil && err3 == nil {
			note("unpublished", !pubM)
			note("unstaged", !stageM)
			note("detached", va == nil)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return order
}

const topologyKey = "topology.lvm.carve.dev/node"

// pinnedNode is the node a PV's node affinity names ("" for none).
func pinnedNode(pv *corev1.PersistentVolume) string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return ""
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == topologyKey && len(e.Values) == 1 {
				return e.Values[0]
			}
		}
	}
	return ""
}

func pinnedTo(pv *corev1.PersistentVolume, node string) bool { return pinnedNode(pv) == node }
