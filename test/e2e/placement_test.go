//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Placement on two LVM nodes: the scheduler puts a claim where
// there is room, from the CSIStorageCapacity objects Carve's capacity
// feeds, and those objects follow every change on both nodes. One node
// is filled by a claim pinned there; the next claim, free to go anywhere,
// lands on the other. Then a StatefulSet of 6 with pod anti-affinity
// spreads over both, each replica's LV on its own pod's node.
//
// It fills a VG, so it runs alone (no t.Parallel).
func TestPlacementFollowsCapacity(t *testing.T) {
	checkCapacities(t, "at the start")

	// Fill carve-vm, but for less than the next claim needs.
	const overflowSize = 512 * mi
	fillSize := (vgFree(t, vmNode) - overflowSize/2) / (4 * mi) * (4 * mi) // whole extents
	create(t, pvc("fill", "carve-thick", fmt.Sprint(fillSize)))
	fill := runPodWith(t, "fill-1", "fill", onNode(vmNode))
	checkCapacities(t, "with "+vmNode+" full")

	create(t, pvc("overflow", "carve-thick", fmt.Sprint(overflowSize)))
	over := runPod(t, "overflow-1", "overflow")
	if over.Spec.NodeName != vmNode2 {
		t.Errorf("a claim of %d MiB went to %s, with %d MiB free there; want %s", overflowSize/mi, over.Spec.NodeName,
			vgFree(t, vmNode)/mi, vmNode2)
	}
	if l, err := lvOn(vmNode2, boundClaim(t, "overflow").Spec.VolumeName); err != nil || l == nil {
		t.Errorf("the overflow claim's LV on %s: %+v, %v", vmNode2, l, err)
	}
	deletePod(t, over.Name)
	deletePod(t, fill.Name)
	deleteClaim(t, "overflow")
	deleteClaim(t, "fill")
	checkCapacities(t, "with both claims gone")

	_, down := statefulSetUp(t, "spread", "carve-thick", 6, spreadOverNodes("spread"))
	perNode := map[string]int{}
	for i := range 6 {
		var p corev1.Pod
		name := fmt.Sprintf("spread-%d", i)
		if err := get(context.Background(), name, &p); err != nil {
			t.Fatal(err)
		}
		perNode[p.Spec.NodeName]++
		pv := boundClaim(t, "data-"+name).Spec.VolumeName
		if l, err := lvOn(p.Spec.NodeName, pv); err != nil || l == nil || l.Active != "active" {
			t.Errorf("replica %s on %s: its LV %s there %+v, %v; want it there, active", name, p.Spec.NodeName, pv, l, err)
		}
	}
	t.Logf("replicas per node: %v", perNode)
	// Preferred anti-affinity: the scheduler spreads as far as it can, 3
	// and 3; a replica that had to be rescheduled may tip it to 4 and 2.
	for _, node := range lvmNodes() {
		if perNode[node] < 2 {
			t.Errorf("%d of 6 replicas on %s (%v): the StatefulSet did not spread", perNode[node], node, perNode)
		}
	}
	checkCapacities(t, "with the StatefulSet running")
	down()
	checkCapacities(t, "with the StatefulSet gone")
}

// checkCapacities waits until the CSIStorageCapacity of carve-thick on
// every LVM node is its VG's free space as lvm2 reports it.
func checkCapacities(t *testing.T, when string) {
	t.Helper()
	start := time.Now()
	// The VG's free space is read at each poll: another test may change
	// the other node's VG meanwhile (TestNodeAdministration).
	for _, node := range lvmNodes() {
		wait(t, "CSIStorageCapacity of carve-thick on "+node+" = its VG's free space", 4*time.Minute,
			func(ctx context.Context) (bool, error) {
				c, err := storageCapacity(ctx, "carve-thick", node)
				if c == nil || err != nil || c.Capacity == nil {
					return false, err
				}
				return c.Capacity.Value() == vgFree(t, node), nil
			})
	}
	t.Logf("capacity %s: right on %v after %s", when, lvmNodes(), time.Since(start).Round(time.Second))
}

// spreadOverNodes gives a pod labelled app=name a preferred anti-affinity
// to the other pods of that label on the same node, as a replicated
// database's chart does.
func spreadOverNodes(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100,
				PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey:   "kubernetes.io/hostname",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				},
			}},
		}}
	}
}
