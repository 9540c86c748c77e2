//go:build e2e

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"carve.dev/carve/driver/api/v1alpha1"
)

// A disk declaration, as an administrator writes it (the ConfigMap
// carve-disks the installed node plugin mounts), gives carve-vm2's VG e2e
// its third disk:
//   - while the disk holds a filesystem, carve node refuses it, says why
//     in the node's NodeStorage and a DiskRefused event, and leaves the
//     filesystem as it was;
//   - wiped, the disk is taken at the agent's next pass: it becomes a PV
//     of e2e, the capacity Carve reports grows by it, and the refusal
//     is gone.
//
// It uses the disk testDevicesFile uses, so it runs after it
// (TestNodeAdministration), and gives the disk back as it came.
func testDeclaredDisks(t *testing.T) {
	const node, disk = vmNode2, "/dev/vdc"
	vm := nodeVM(t, node)
	if out, err := vm.sh("mkfs.ext4", "-q", "-F", "-L", "keepme", disk); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v: %s", disk, err, out)
	}
	before := vgFree(t, node)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "carve-disks", Namespace: driverNS},
		Data: map[string]string{"disks.yaml": "volumeGroups:\n- volumeGroup: e2e\n  nodes: [" + node + "]\n  paths: [" + disk + "]\n"}}
	create(t, cm)
	t.Cleanup(func() { withdrawDeclaration(t, node, cm); restoreVG(t, node, disk) })

	// kubelet brings a ConfigMap made after the pod into its volume at
	// its next sync (up to a minute and a half), the agent reads it at
	// its next pass (each minute).
	var refusals []v1alpha1.DiskRefusal
	wait(t, "NodeStorage "+node+" refusing "+disk, 5*time.Minute, func(ctx context.Context) (bool, error) {
		ns, err := nodeStorageOf(ctx, node)
		refusals = ns.Status.DiskRefusals
		return slices.ContainsFunc(refusals, func(r v1alpha1.DiskRefusal) bool {
			return r.Device == disk && r.VolumeGroup == "e2e" && strings.Contains(r.Reason, `holds a ext4 filesystem (label "keepme")`)
		}), err
	})
	t.Logf("refused: %+v", refusals)
	waitEvent(t, node, "DiskRefused", disk, time.Minute) // on the NodeStorage, in default as every cluster-scoped object's
	if out, err := vm.sh("blkid", "-p", "-o", "value", "-s", "LABEL", disk); err != nil || strings.TrimSpace(out) != "keepme" {
		t.Errorf("the refused disk's filesystem: %q, %v", out, err)
	}
	if got := vgFree(t, node); got != before {
		t.Errorf("VG e2e's free space moved from %d to %d while the disk was refused", before, got)
	}

	if out, err := vm.sh("wipefs", "-q", "-a", disk); err != nil {
		t.Fatalf("wipefs %s: %v: %s", disk, err, out)
	}
	wait(t, "NodeStorage "+node+": VG e2e grown by "+disk+", no refusal", 3*time.Minute, func(ctx context.Context) (bool, error) {
		ns, err := nodeStorageOf(ctx, node)
		for _, vg := range ns.Status.VolumeGroups {
			if vg.Name == "e2e" && vg.FreeBytes > before && len(ns.Status.DiskRefusals) == 0 {
				return true, err
			}
		}
		return false, err
	})
	pvs, err := vm.sh("pvs", "--noheadings", "-o", "pv_name", "--select", "vg_name=e2e")
	if err != nil || !slices.Contains(strings.Fields(pvs), disk) {
		t.Errorf("PVs of e2e on %s: %q, %v; want %s among them", node, pvs, err, disk)
	}
	checkCapacities(t, "after the declared disk was taken")
}

// withdrawDeclaration deletes the declaration and waits until kubelet has
// taken its file from carve node's volume on node, and a few seconds
// more: a pass that read it finishes with the disk still a member of
// the VG (nothing to do), and the next reads no declaration. Without
// this, the disk wiped by restoreVG would be taken again.
func withdrawDeclaration(t *testing.T, node string, cm *corev1.ConfigMap) {
	t.Helper()
	if err := h.kc.Delete(context.Background(), cm); err != nil {
		t.Errorf("delete the declaration: %v", err)
		return
	}
	const file = "/var/lib/kubelet/pods/*/volumes/kubernetes.io~configmap/disk-declaration/disks.yaml"
	wait(t, "the declaration's file gone from carve node's volume on "+node, 3*time.Minute, func(context.Context) (bool, error) {
		out, err := nodeVM(t, node).sh("sh", "-c", "ls "+file+" 2>/dev/null; true")
		return strings.TrimSpace(out) == "", err
	})
	time.Sleep(10 * time.Second)
}

func nodeStorageOf(ctx context.Context, node string) (v1alpha1.NodeStorage, error) {
	var ns v1alpha1.NodeStorage
	err := h.kc.Get(ctx, types.NamespacedName{Name: node}, &ns)
	return ns, err
}
