//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"carve.dev/carve/driver/cluster/api/v1alpha1"
)

// Scenario 7: carve controller and carve node are killed mid-flow (while
// the volume is being provisioned, and again while it is in use) and
// restarted; everything converges and nothing leaks.
func TestRestartsConverge(t *testing.T) {
	create(t, pvc("restart", "carve-thick", "256Mi"))
	create(t, pod("restart-1", "restart"))
	// Mid-provisioning: the scheduler has picked the node, the volume is
	// being made. Both sides die as in a power cut.
	wait(t, "node selected for the claim", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var c corev1.PersistentVolumeClaim
		err := get(ctx, "restart", &c)
		return c.Annotations["volume.kubernetes.io/selected-node"] != "", err
	})
	restartBoth(t, true)

	p1 := waitRunning(t, "restart-1", 5*time.Minute)
	pvName := boundClaim(t, "restart").Spec.VolumeName
	writeData(t, p1, "state", "survives restarts")

	// In use: restart both gracefully, then tear down and come back.
	restartBoth(t, false)
	deletePod(t, "restart-1")
	wait(t, "detached after restarts", 3*time.Minute, func(ctx context.Context) (bool, error) {
		va, err := volumeAttachment(ctx, pvName)
		return va == nil && err == nil, err
	})
	p2 := runPod(t, "restart-2", "restart")
	if got := readData(t, p2, "state"); got != "survives restarts" {
		t.Errorf("after restarts the volume holds %q", got)
	}
	deletePod(t, "restart-2")
	deleteClaim(t, "restart")
	checkNoLeaks(t)
}

// restartBoth restarts carve controller (on the host node) and carve node
// (on the VM node): their containers are killed, SIGKILL with crash as in
// a power cut, SIGTERM otherwise, and kubelet restarts them in their pods
// (restartPolicy Always), as on a real node. It waits until both are
// ready again.
func restartBoth(t *testing.T, crash bool) {
	t.Helper()
	sig := "SIGTERM"
	if crash {
		sig = "SIGKILL"
	}
	ctrl := carvePod(t, "controller", hostNode)
	node := carvePod(t, "node", vmNode)
	ctrlRestarts, nodeRestarts := restarts(ctrl, "carve"), restarts(node, "carve")
	killContainer(t, ctrl, "carve", sig)
	killContainer(t, node, "carve", sig)
	wait(t, "carve controller and carve node restarted", 3*time.Minute, func(ctx context.Context) (bool, error) {
		c, n := carvePod(t, "controller", hostNode), carvePod(t, "node", vmNode)
		return restarts(c, "carve") > ctrlRestarts && restarts(n, "carve") > nodeRestarts && podReady(c) && podReady(n), nil
	})
	if err := h.waitPlugin(vmNode); err != nil {
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
	lvs, err := listLVs()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lvs {
		if !have[l.Name] {
			t.Errorf("LV %s has no PV", l.Name)
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
	var ns v1alpha1.NodeStorage
	if err := h.kc.Get(ctx, types.NamespacedName{Name: vmNode}, &ns); err != nil {
		t.Fatal(err)
	}
	if len(ns.Status.OrphanedVolumes) > 0 {
		t.Errorf("carve node reports orphaned LVs: %v", ns.Status.OrphanedVolumes)
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
