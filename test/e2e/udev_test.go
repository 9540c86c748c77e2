//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// udev and Carve together: on a node whose udevd runs lvm2's and
// device-mapper's rules, Carve's lvm2 (in its container, without udev)
// makes, activates, deactivates and removes 20 volumes at once. One pod
// uses 20 raw block claims on carve-vm2, so the burst is 20 CreateVolume,
// ControllerPublishVolume, NodeStage and NodePublish calls side by side;
// its deletion 20 of each way back; the claims' deletion 20 removals.
// At each settled point: every volume's /dev/e2e link is there exactly
// when it is active and leads to its device, no link under /dev/e2e or
// /dev/mapper leads nowhere, and no udev cookie waits in any IPC
// namespace of the node (udevStrayScript).
func TestUdevBurst(t *testing.T) {
	fullRunOnly(t)
	const n, node = 20, vmNode2
	p := pod("burst-1", "")
	p.Spec.Volumes = nil
	c := &p.Spec.Containers[0]
	c.VolumeMounts = nil
	block := corev1.PersistentVolumeBlock
	var claims []string
	for i := range n {
		name := fmt.Sprintf("burst-%02d", i)
		claim := pvc(name, "carve-thin", "16Mi")
		claim.Spec.VolumeMode = &block
		create(t, claim)
		claims = append(claims, name)
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
		c.VolumeDevices = append(c.VolumeDevices, corev1.VolumeDevice{Name: name, DevicePath: "/dev/" + name})
	}
	onNode(node)(p)
	start := time.Now()
	create(t, p)
	waitRunning(t, p.Name, 10*time.Minute)
	t.Logf("%d volumes made, attached, staged and published in %s", n, time.Since(start).Round(time.Second))
	var pvs []string
	for _, name := range claims {
		pvs = append(pvs, boundClaim(t, name).Spec.VolumeName)
	}
	checkDevLinks(t, node, pvs, true)

	start = time.Now()
	deletePod(t, p.Name)
	for _, pv := range pvs {
		waitDetached(t, pv, "after the pod's deletion")
	}
	t.Logf("%d volumes unpublished, unstaged and detached in %s", n, time.Since(start).Round(time.Second))
	checkDevLinks(t, node, pvs, false)

	start = time.Now()
	for _, name := range claims {
		startClaimDelete(t, name)
	}
	wait(t, fmt.Sprintf("the %d LVs removed", n), 10*time.Minute, func(context.Context) (bool, error) {
		lvs, err := listLVs(node)
		for _, l := range lvs {
			for _, pv := range pvs {
				if l.Name == pv {
					return false, err
				}
			}
		}
		return err == nil, err
	})
	wait(t, fmt.Sprintf("the %d PVs gone", n), 5*time.Minute, func(ctx context.Context) (bool, error) {
		for _, pv := range pvs {
			if ok, err := gone(get(ctx, pv, &corev1.PersistentVolume{})); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	})
	t.Logf("%d volumes removed in %s", n, time.Since(start).Round(time.Second))
	checkDevLinks(t, node, pvs, false)
}

// checkDevLinks checks, on node, that each volume's /dev/e2e link is there
// (leading to a device) when active is true and absent when false, and
// that udevStrayScript finds nothing.
func checkDevLinks(t *testing.T, node string, pvs []string, active bool) {
	t.Helper()
	vm := nodeVM(t, node)
	script := `for pv in "$@"; do
	l=/dev/e2e/$pv
	if [ -e "$l" ]; then echo "$pv device"; elif [ -L "$l" ]; then echo "$pv dangling"; else echo "$pv none"; fi
done`
	out, err := vm.sh(append([]string{"sh", "-c", script, "sh"}, pvs...)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(nonEmptyLines(out)); got != len(pvs) {
		t.Fatalf("on %s, %d answers for %d volumes: %q", node, got, len(pvs), out)
	}
	want := "none"
	if active {
		want = "device"
	}
	for _, l := range nonEmptyLines(out) {
		if f := strings.Fields(l); len(f) != 2 || f[1] != want {
			t.Errorf("on %s, /dev/e2e link of %s: %s, want %s", node, f[0], f[len(f)-1], want)
		}
	}
	stray, err := vm.sh("sh", "-c", udevStrayScript)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range nonEmptyLines(stray) {
		t.Errorf("on %s: %s", node, l)
	}
}
