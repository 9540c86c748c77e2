//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"carve.dev/carve/driver/api/v1alpha1"
)

// Scenario 7: carve controller and carve node are killed mid-flow (while
// the volume is being provisioned, and again while it is in use) and
// restarted; everything converges and nothing leaks.
func TestRestartsConverge(t *testing.T) {
	create(t, pvc("restart", "carve-thick", "256Mi"))
	create(t, pod("restart-1", "restart"))
	// Mid-provisioning: the scheduler has picked the node, the volume is
	// being made. Both sides die as in a power cut.
	var node string
	wait(t, "node selected for the claim", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var c corev1.PersistentVolumeClaim
		err := get(ctx, "restart", &c)
		node = c.Annotations["volume.kubernetes.io/selected-node"]
		return node != "", err
	})
	restartBoth(t, node, true)

	p1 := waitRunning(t, "restart-1", 5*time.Minute)
	pvName := boundClaim(t, "restart").Spec.VolumeName
	writeData(t, p1, "state", "survives restarts")

	// In use: restart both gracefully, then tear down and come back.
	restartBoth(t, node, false)
	deletePod(t, "restart-1")
	waitDetached(t, pvName, "after restarts")
	p2 := runPod(t, "restart-2", "restart")
	if got := readData(t, p2, "state"); got != "survives restarts" {
		t.Errorf("after restarts the volume holds %q", got)
	}
	deletePod(t, "restart-2")
	deleteClaim(t, "restart")
	checkNoLeaks(t)
}

// restartBoth restarts carve controller (on the host node) and carve node
// on node: their containers are killed, SIGKILL with crash as in
// a power cut, SIGTERM otherwise, and kubelet restarts them in their pods
// (restartPolicy Always), as on a real node. It waits until both are
// ready again.
func restartBoth(t *testing.T, node string, crash bool) {
	t.Helper()
	sig := "SIGTERM"
	if crash {
		sig = "SIGKILL"
	}
	ctrl := carvePod(t, "controller", hostNode)
	agent := carvePod(t, "node", node)
	ctrlRestarts, nodeRestarts := restarts(ctrl, "carve"), restarts(agent, "carve")
	killContainer(t, ctrl, "carve", sig)
	killContainer(t, agent, "carve", sig)
	wait(t, "carve controller and carve node on "+node+" restarted", 3*time.Minute, func(ctx context.Context) (bool, error) {
		c, n := carvePod(t, "controller", hostNode), carvePod(t, "node", node)
		return restarts(c, "carve") > ctrlRestarts && restarts(n, "carve") > nodeRestarts && podReady(c) && podReady(n), nil
	})
	if err := h.waitPlugin(node); err != nil {
		t.Fatal(err)
	}
}

func checkNoLeaks(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var pvs corev1.PersistentVolumeList
	if err := h.kc.List(ctx, &pvs); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{"thinpool": true}
	for _, pv := range pvs.Items {
		have[pv.Name] = true
	}
	for _, node := range lvmNodes() {
		lvs, err := listLVs(node)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lvs {
			if !have[l.Name] {
				t.Errorf("LV %s on %s has no PV", l.Name, node)
			}
		}
	}
	var crs v1alpha1.LogicalVolumeList
	if err := h.kc.List(ctx, &crs); err != nil {
		t.Fatal(err)
	}
	for _, lv := range crs.Items {
		if !have[lv.Spec.Name] {
			t.Errorf("LogicalVolume %s has no PV", lv.Name)
		}
	}
	for _, node := range lvmNodes() {
		var ns v1alpha1.NodeStorage
		if err := h.kc.Get(ctx, types.NamespacedName{Name: node}, &ns); err != nil {
			t.Fatal(err)
		}
		if len(ns.Status.OrphanedVolumes) > 0 {
			t.Errorf("carve node on %s reports orphaned LVs: %v", node, ns.Status.OrphanedVolumes)
		}
	}
	var vas storagev1.VolumeAttachmentList
	if err := h.kc.List(ctx, &vas); err != nil {
		t.Fatal(err)
	}
	for _, va := range vas.Items {
		if s := va.Spec.Source.PersistentVolumeName; s != nil && !have[*s] {
			t.Errorf("VolumeAttachment %s of a PV that is gone", va.Name)
		}
	}
}

// carve node's pod is deleted while a workload writes to its volume, and
// the DaemonSet makes a new one: the workload's writes go on (the mounts
// belong to the node, not to carve node's pod), none is lost, and the new
// pod unpublishes and unstages the volume cleanly when the workload goes.
func TestNodePodReplacedUnderWrites(t *testing.T) {
	fullRunOnly(t)
	ctx := context.Background()
	create(t, pvc("steady", "carve-thick", "64Mi"))
	p := runPodWith(t, "steady-1", "steady", appendLines)
	pvName := boundClaim(t, "steady").Spec.VolumeName
	lines := func() int {
		t.Helper()
		return checkSequence(t, readData(t, p, "log"))
	}
	wait(t, "the writer under way", time.Minute, func(context.Context) (bool, error) { return lines() > 5, nil })

	node := p.Spec.NodeName
	old := carvePod(t, "node", node)
	if err := h.kc.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	before := lines()
	var fresh *corev1.Pod
	wait(t, "a new carve node pod on "+node+", ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods, _, err := carvePods(ctx, "node", node)
		for _, q := range pods {
			if q.UID != old.UID && podReady(q) {
				fresh = q
				return true, nil
			}
		}
		return false, err
	})
	t.Logf("carve node pod %s replaced by %s; the writer wrote %d lines, then %d", old.Name, fresh.Name, before, lines())
	if err := h.waitPlugin(node); err != nil {
		t.Fatal(err)
	}
	after := lines()
	wait(t, "the writer still writing", time.Minute, func(context.Context) (bool, error) { return lines() > after, nil })

	deletePod(t, "steady-1")
	waitDetached(t, pvName, "unstaged by the new carve node")
	var pv corev1.PersistentVolume
	if err := get(ctx, pvName, &pv); err != nil {
		t.Fatal(err)
	}
	if m, err := mounted(node, stagingPath(pv.Spec.CSI.VolumeHandle)); m || err != nil {
		t.Errorf("staging path still mounted after detach (%v)", err)
	}
	r := runPod(t, "steady-2", "steady")
	if n := checkSequence(t, readData(t, r, "log")); n <= after {
		t.Errorf("the volume holds %d lines, the writer had written more than %d", n, after)
	}
	deletePod(t, "steady-2")
	deleteClaim(t, "steady")
}

// appendLines makes a pod append 1, 2, 3... to /data/log, each line
// synced, 5 a second (checkSequence reads them back).
func appendLines(p *corev1.Pod) {
	p.Spec.Containers[0].Command = []string{"sh", "-c",
		`i=0; while :; do i=$((i+1)); echo $i >>/data/log; sync /data/log; sleep 0.2; done`}
}

// checkSequence checks that log holds the lines 1, 2, 3... with none
// missing or repeated, but for a last line cut short by a read during a
// write, and returns how many whole lines it holds.
func checkSequence(t *testing.T, log string) int {
	t.Helper()
	lines := strings.Split(log, "\n")
	n := 0
	for i, l := range lines {
		if l == "" && i == len(lines)-1 {
			break
		}
		if l != strconv.Itoa(n+1) {
			if i == len(lines)-1 {
				break // the line being written
			}
			t.Fatalf("line %d of the writer's log is %q, want %d", i+1, l, n+1)
		}
		n++
	}
	return n
}
