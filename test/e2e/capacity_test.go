//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// Scenario 6: csi-provisioner's CSIStorageCapacity objects follow the VG's
// free space (from NodeStorage, no LVM call), and a PVC too large for any
// node stays Pending with a clear event, without an LV being tried.
func TestTooLargeStaysPending(t *testing.T) {
	ctx := context.Background()
	for _, node := range lvmNodes() {
		waitCapacity(t, node, vgFree(t, node))
	}
	// The host node's VG is small, and its capacity says so.
	hostFree := hostVGFree(t)
	waitCapacity(t, hostNode, hostFree)
	if hostFree >= hostVGSize {
		t.Errorf("carve-host's VG reports %d bytes free out of %d", hostFree, hostVGSize)
	}

	create(t, pvc("huge", "carve-thick", "20Gi"))
	create(t, pod("huge-1", "huge"))
	waitEvent(t, "huge-1", "FailedScheduling", "enough free storage", 2*time.Minute)
	// Give the provisioner time to (wrongly) act, then check nothing did.
	time.Sleep(10 * time.Second)
	var p corev1.Pod
	var c corev1.PersistentVolumeClaim
	if err := get(ctx, "huge-1", &p); err != nil {
		t.Fatal(err)
	}
	if err := get(ctx, "huge", &c); err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
		t.Errorf("pod of a too-large claim: node %q, phase %s", p.Spec.NodeName, p.Status.Phase)
	}
	if c.Status.Phase != corev1.ClaimPending || c.Annotations["volume.kubernetes.io/selected-node"] != "" {
		t.Errorf("too-large claim: phase %s, annotations %v", c.Status.Phase, c.Annotations)
	}
	var lvs v1alpha1.LogicalVolumeList
	if err := h.kc.List(ctx, &lvs); err != nil {
		t.Fatal(err)
	}
	for _, lv := range lvs.Items {
		if lv.Spec.RequiredBytes >= 20<<30 {
			t.Errorf("a LogicalVolume was made for the too-large claim: %s", lv.Name)
		}
	}
	deletePod(t, "huge-1")
	if err := h.kc.Delete(ctx, &c); err != nil {
		t.Fatal(err)
	}
}

// When the capacity the scheduler saw is stale (here LVs made behind
// Carve's back took the space of every node), the node refuses the
// volume with RESOURCE_EXHAUSTED and csi-provisioner reschedules; once
// the space is back, the claim binds and the pod runs, without anyone's
// help.
func TestNodeRefusalReschedules(t *testing.T) {
	// The scheduler must first know that the nodes have room.
	for _, node := range lvmNodes() {
		wait(t, "CSIStorageCapacity of carve-thick on "+node, 4*time.Minute, func(ctx context.Context) (bool, error) {
			c, err := storageCapacity(ctx, "carve-thick", node)
			return c != nil && c.Capacity != nil && c.Capacity.Value() > 1<<30, err
		})
	}
	// Then the space goes, and the claim comes before the capacity
	// (NodeStorage every 30 s, csi-provisioner's poll every minute) shows it.
	refill := fillVGs(t)
	tight := pvc("tight", "carve-thick", "256Mi")
	create(t, tight)
	create(t, pod("tight-1", "tight"))
	waitEvent(t, "tight", "ProvisioningFailed", "ResourceExhausted", 2*time.Minute)
	// The claim's tenant reads the node's refusal itself.
	tenantSees(t, tight, "Failed", "ResourceExhausted")
	refill()
	// Once the space is back, nobody needs to step in.
	waitRunning(t, "tight-1", 6*time.Minute)
	pvName := boundClaim(t, "tight").Spec.VolumeName
	if l, err := lvInfo(pvName); err != nil || l == nil {
		t.Errorf("LV of the rescheduled claim: %+v, %v", l, err)
	}
	deletePod(t, "tight-1")
	deleteClaim(t, "tight")
}

// fillVGs takes every VM node's free space with an LV made behind Carve's
// back; the function it returns gives the space back (and runs at the
// test's end if the test has not).
func fillVGs(t *testing.T) func() {
	t.Helper()
	var filled []string
	release := func() {
		for len(filled) > 0 {
			if _, err := nodeVM(t, filled[0]).sh("lvremove", "-q", "-y", "e2e/filler"); err != nil {
				t.Error(err)
			}
			filled = filled[1:]
		}
	}
	t.Cleanup(release)
	for _, node := range lvmNodes() {
		if _, err := nodeVM(t, node).sh("lvcreate", "-q", "-an", "-Zn", "-l", "100%FREE", "-n", "filler", "e2e"); err != nil {
			t.Fatal(err)
		}
		filled = append(filled, node)
	}
	return release
}

// waitCapacity waits until the CSIStorageCapacity of carve-thick on node
// says free bytes.
func waitCapacity(t *testing.T, node string, free int64) {
	t.Helper()
	wait(t, fmt.Sprintf("CSIStorageCapacity of carve-thick on %s = %d (VG free space)", node, free), 4*time.Minute,
		func(ctx context.Context) (bool, error) {
			c, err := storageCapacity(ctx, "carve-thick", node)
			if c == nil || err != nil {
				return false, err
			}
			return c.Capacity != nil && c.Capacity.Value() == free, nil
		})
}

var vgFreeArgs = []string{"vgs", "--noheadings", "--units", "b", "--nosuffix", "-o", "vg_free", "e2e"}

// vgFree is VG e2e's free space on a VM node, from vgs.
func vgFree(t *testing.T, node string) int64 {
	t.Helper()
	out, err := nodeVM(t, node).sh(vgFreeArgs...)
	if err != nil {
		t.Fatal(err)
	}
	return parseBytes(t, out)
}

// hostVGFree is VG e2e's free space on the host node, from vgs.
func hostVGFree(t *testing.T) int64 {
	t.Helper()
	cmd := exec.Command(vgFreeArgs[0], vgFreeArgs[1:]...)
	cmd.Env = append(os.Environ(), h.hostLVMEnv...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("vgs on the host: %v", errText(err))
	}
	return parseBytes(t, string(out))
}

func parseBytes(t *testing.T, out string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("vgs: %q", out)
	}
	return n
}

// storageCapacity finds the CSIStorageCapacity of class for node.
func storageCapacity(ctx context.Context, class, node string) (*storagev1.CSIStorageCapacity, error) {
	var list storagev1.CSIStorageCapacityList
	if err := h.kc.List(ctx, &list, client.InNamespace(driverNS)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		c := &list.Items[i]
		if c.StorageClassName == class && c.NodeTopology != nil && c.NodeTopology.MatchLabels[topologyKey] == node {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no CSIStorageCapacity for %s on %s (of %d)", class, node, len(list.Items))
}
