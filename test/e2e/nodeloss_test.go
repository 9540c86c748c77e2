//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/nodeloss"
)

// Node loss: the VM node loses its power and boots again on the same
// disks. The pod that used a volume there runs again with its synced data,
// and carve node leaves active exactly the published LV, although the boot
// activated every LV (test/e2e/node-vm.sh, as lvm2's autoactivation does).
func TestNodeReboot(t *testing.T) {
	fullRunOnly(t)
	create(t, pvc("reboot-used", "carve-thick", "256Mi"))
	create(t, pvc("reboot-idle", "carve-thin", "256Mi"))
	used := runPodWith(t, "reboot-used", "reboot-used", onNode(vmNode))
	writeData(t, used, "state", "synced before the power cut")
	idle := runPodWith(t, "reboot-idle", "reboot-idle", onNode(vmNode))
	writeData(t, idle, "state", "written, then detached")
	usedPV, idlePV := boundClaim(t, "reboot-used").Spec.VolumeName, boundClaim(t, "reboot-idle").Spec.VolumeName
	deletePod(t, "reboot-idle")
	waitDetached(t, idlePV, "before the reboot")

	cut := rebootVM(t, vmNode)
	used = waitStartedSince(t, "reboot-used", "app", cut)
	if got := readData(t, used, "state"); got != "synced before the power cut" {
		t.Errorf("after the reboot the used volume holds %q", got)
	}
	wait(t, "the used LV active and the idle one not", 3*time.Minute, func(context.Context) (bool, error) {
		u, err := lvInfo(usedPV)
		if err != nil || u == nil {
			return false, err
		}
		i, err := lvInfo(idlePV)
		if err != nil || i == nil {
			return false, err
		}
		t.Logf("after the reboot: %s active=%q, %s active=%q", usedPV, u.Active, idlePV, i.Active)
		return u.Active == "active" && i.Active != "active", nil
	})
	again := runPod(t, "reboot-idle-2", "reboot-idle")
	if got := readData(t, again, "state"); got != "written, then detached" {
		t.Errorf("after the reboot the idle volume holds %q", got)
	}
	for _, p := range []string{"reboot-used", "reboot-idle-2"} {
		deletePod(t, p)
	}
	for _, c := range []string{"reboot-used", "reboot-idle"} {
		deleteClaim(t, c)
	}
	checkNoLeaks(t)
}

// Node loss on two LVM nodes: carve-vm is
// gone for good (power cut, never back as far as anyone knows) while
// carve-vm2 serves a writer of its own. Following deploy/README.md's
// runbook, the lost node's pods go, its volumes detach, and its PVCs are
// deleted without its agent; the writer on carve-vm2 never stops and
// loses nothing, the host node is untouched, and the lost workload,
// recreated with a new claim, runs on carve-vm2. Then the node comes back
// after all: the LVs of the released volumes are there, untouched,
// reported as orphans, and the administrator removes them.
func TestNodeLostForGood(t *testing.T) {
	fullRunOnly(t)
	create(t, pvc("survivor", "carve-thick", "64Mi"))
	survivor := runPodWith(t, "survivor-1", "survivor", func(p *corev1.Pod) {
		onNode(vmNode2)(p)
		appendLines(p)
	})
	survivorLines := func() int { t.Helper(); return checkSequence(t, readData(t, survivor, "log")) }
	create(t, pvc("lost-used", "carve-thick", "256Mi"))
	create(t, pvc("lost-idle", "carve-thin", "256Mi"))
	used := runPodWith(t, "lost-used", "lost-used", onNode(vmNode))
	writeData(t, used, "state", "on the lost node")
	// WaitForFirstConsumer: a pod makes the volume.
	runPodWith(t, "lost-idle", "lost-idle", onNode(vmNode))
	usedPV, idlePV := boundClaim(t, "lost-used").Spec.VolumeName, boundClaim(t, "lost-idle").Spec.VolumeName
	deletePod(t, "lost-idle")
	waitDetached(t, idlePV, "before the node is lost")
	hostFree := hostVGFree(t)

	nodeVM(t, vmNode).powerCut()
	lostSince := time.Now()
	kubectl(t, "taint", "node", vmNode, nodeloss.OutOfServiceTaint+"=nodeshutdown:NoExecute")
	kubectl(t, "annotate", "nodestorage", vmNode, nodeloss.Annotation+"=true")
	waitEvent(t, vmNode, "NodeLost", " snapshots remain on lost node "+vmNode, 2*time.Minute)
	wait(t, "pod lost-used deleted by Kubernetes", 5*time.Minute, func(ctx context.Context) (bool, error) {
		return gone(get(ctx, "lost-used", &corev1.Pod{}))
	})
	waitDetached(t, usedPV, "from the lost node")
	for _, c := range []string{"lost-used", "lost-idle"} {
		deleteClaimOfLostNode(t, c)
	}
	for _, pv := range []string{usedPV, idlePV} {
		waitEvent(t, pv, "Released", "LV e2e/"+pv+" stays on that node's disks", time.Minute)
	}
	if got := hostVGFree(t); got != hostFree {
		t.Errorf("the host node's VG went from %d to %d bytes free while the VM node was released", hostFree, got)
	}
	kubectl(t, "delete", "node", vmNode)
	t.Logf("node released in %s", time.Since(lostSince).Round(time.Second))

	// The other node served on: its writer's lines go on from before the
	// cut, none missing.
	atCut := survivorLines()
	wait(t, "the writer on "+vmNode2+" still writing", time.Minute, func(context.Context) (bool, error) {
		return survivorLines() > atCut, nil
	})
	// The lost workload, recreated as the runbook says, runs on the node
	// left, on a new (empty) volume.
	create(t, pvc("lost-used", "carve-thick", "256Mi"))
	again := runPod(t, "lost-used-again", "lost-used")
	if again.Spec.NodeName != vmNode2 {
		t.Errorf("the recreated workload runs on %q, want %s", again.Spec.NodeName, vmNode2)
	}
	writeData(t, again, "state", "recreated after the node was lost")
	deletePod(t, "lost-used-again")
	deleteClaim(t, "lost-used")
	deletePod(t, "survivor-1")
	deleteClaim(t, "survivor")

	// Back after all: a new Node (no taint), so no longer lost.
	if err := h.bootVM(vmNode); err != nil {
		t.Fatal(err)
	}
	if err := h.waitPlugin(vmNode); err != nil {
		t.Fatal(err)
	}
	orphans := []string{"e2e/" + usedPV, "e2e/" + idlePV}
	waitOrphans(t, orphans)
	waitEvent(t, vmNode, "OrphanedVolume", "LV e2e/"+usedPV, time.Minute)
	for _, pv := range []string{usedPV, idlePV} {
		if lv, err := lvInfo(pv); err != nil || lv == nil {
			t.Errorf("LV %s of a released volume: %+v, %v; want it left in place", pv, lv, err)
		}
	}
	// The runbook's end: the administrator removes them, and the mark.
	for _, pv := range []string{usedPV, idlePV} {
		if _, err := nodeVM(t, vmNode).sh("lvremove", "-y", "e2e/"+pv); err != nil {
			t.Fatal(err)
		}
	}
	kubectl(t, "annotate", "nodestorage", vmNode, nodeloss.Annotation+"-")
	waitOrphans(t, nil)
	checkNoLeaks(t)
}

// rebootVM cuts a VM node's power, boots it again on the same disks and
// waits for carve node there; it returns when the power was cut.
func rebootVM(t *testing.T, node string) time.Time {
	t.Helper()
	nodeVM(t, node).powerCut()
	cut := time.Now()
	if err := h.bootVM(node); err != nil {
		t.Fatal(err)
	}
	waitStartedSince(t, "", "carve", cut)
	if err := h.waitPlugin(node); err != nil {
		t.Fatal(err)
	}
	return cut
}

// waitStartedSince waits until container of pod name (of the test; with
// name "", carve node on the VM node) runs, started after since, and the
// pod is ready.
func waitStartedSince(t *testing.T, name, container string, since time.Time) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	what := "pod " + name
	if name == "" {
		what = "carve node on " + vmNode
	}
	wait(t, what+" running again after the reboot", 6*time.Minute, func(ctx context.Context) (bool, error) {
		var pods []*corev1.Pod
		if name == "" {
			nodes, _, err := carvePods(ctx, "node", vmNode)
			if err != nil {
				return false, err
			}
			pods = nodes
		} else {
			var p corev1.Pod
			if err := get(ctx, name, &p); err != nil {
				return false, err
			}
			pods = []*corev1.Pod{&p}
		}
		for _, p := range pods {
			s := containerStatus(p, container)
			if s != nil && s.State.Running != nil && s.State.Running.StartedAt.After(since) && podReady(p) {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	return found
}

// deleteClaimOfLostNode deletes a PVC and waits until its PV and
// LogicalVolume are gone (its LV is out of reach: the node is down).
func deleteClaimOfLostNode(t *testing.T, name string) {
	t.Helper()
	pv := startClaimDelete(t, name)
	wait(t, "PV "+pv+" and its LogicalVolume gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		if ok, err := gone(get(ctx, pv, &corev1.PersistentVolume{})); !ok || err != nil {
			return false, err
		}
		return gone(h.kc.Get(ctx, types.NamespacedName{Name: pv}, &v1alpha1.LogicalVolume{}))
	})
}

// waitOrphans waits until the VM node's NodeStorage lists want (sorted) as
// its orphaned volumes.
func waitOrphans(t *testing.T, want []string) {
	t.Helper()
	slices.Sort(want)
	wait(t, "orphans on "+vmNode+" reported as "+fmtList(want), 4*time.Minute, func(ctx context.Context) (bool, error) {
		var ns v1alpha1.NodeStorage
		if err := h.kc.Get(ctx, types.NamespacedName{Name: vmNode}, &ns); err != nil {
			return false, err
		}
		got := slices.Clone(ns.Status.OrphanedVolumes)
		slices.Sort(got)
		return slices.Equal(got, want), nil
	})
}

func fmtList(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return "[" + strings.Join(l, ", ") + "]"
}

// kubectl runs kubectl as the cluster admin, as an operator would.
func kubectl(t *testing.T, args ...string) {
	t.Helper()
	out, err := h.kubectl(args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl %v: %s", args, out)
}
