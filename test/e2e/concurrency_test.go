//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/api/v1alpha1"
)

// Issue 15: a clone's copy must not hold up other volumes of its node.
// A 1 GiB thick claim is cloned while carve node may read the VG's disks
// at only 8 MiB/s (a cgroup throttle; unthrottled, the emulated VM copies
// 1 GiB in about half a minute), so the copy would take two minutes;
// meanwhile another claim's pod on the same node (which took about half a
// minute) must be provisioned, attached, staged and published, i.e.
// Running, while the clone's LogicalVolume is still Copying. Only reads
// are throttled: the other volume's lvm commands and mkfs mostly write,
// and their few reads wait behind at most one 4 MiB read of the copy.
// Then the throttle goes, and the clone runs with the source's data.
func TestPublishWhileACloneCopies(t *testing.T) {
	ctx := context.Background()
	create(t, pvc("copysrc", "carve-thick", "1Gi"))
	p := runPod(t, "copysrc-1", "copysrc")
	writeData(t, p, "state", "cloned")

	unthrottle := throttleNode(t, 8*mi)
	defer unthrottle()
	clone := pvc("copyclone", "carve-thick", "1Gi")
	clone.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "copysrc"}
	create(t, clone)
	create(t, pod("copyclone-1", "copyclone"))
	// csi-provisioner names the volume pvc-<claim UID>; so is its
	// LogicalVolume (volume.LVName keeps such names).
	cloneLV := "pvc-" + string(clone.UID)
	wait(t, "the clone's LogicalVolume Copying", 3*time.Minute, func(ctx context.Context) (bool, error) {
		return copying(ctx, cloneLV)
	})

	start := time.Now()
	create(t, pvc("copybusy", "carve-thick", "64Mi"))
	runPodWithin(t, "copybusy-1", "copybusy", 90*time.Second)
	t.Logf("another pod ran %v after it was made, while the clone copied", time.Since(start).Round(time.Second))
	if still, err := copying(ctx, cloneLV); err != nil || !still {
		t.Fatalf("the clone's copy ended before the other pod ran (%v): the throttle was too weak, this proves nothing", err)
	}

	unthrottle()
	p2 := waitRunning(t, "copyclone-1", 8*time.Minute)
	if got := readData(t, p2, "state"); got != "cloned" {
		t.Errorf("the clone holds %q", got)
	}
	for _, name := range []string{"copybusy", "copyclone", "copysrc"} {
		deletePod(t, name+"-1")
		deleteClaim(t, name)
	}
}

// runPodWithin is runPod with a tighter bound.
func runPodWithin(t *testing.T, name, claim string, timeout time.Duration) {
	t.Helper()
	create(t, pod(name, claim))
	waitRunning(t, name, timeout)
}

// copying tells whether LogicalVolume name exists and says its data is
// being copied.
func copying(ctx context.Context, name string) (bool, error) {
	var lv v1alpha1.LogicalVolume
	if err := h.kc.Get(ctx, types.NamespacedName{Name: name}, &lv); err != nil {
		_, err = gone(err)
		return false, err
	}
	c := meta.FindStatusCondition(lv.Status.Conditions, agent.ConditionReady)
	return lv.Status.VolumeID == "" && c != nil && c.Reason == agent.ReasonCopying, nil
}

// throttleNode moves carve node in the VM into a cgroup that limits its
// reads of the VG's disks to rate bytes/s (its commands, forked after,
// inherit it); the returned func moves it back, once.
func throttleNode(t *testing.T, rate int64) (undo func()) {
	t.Helper()
	pid := strings.TrimSpace(vmOut(t, "sh", "-c",
		`for p in /proc/[0-9]*; do [ "$(cat "$p/comm" 2>/dev/null)" = carve ] && echo "${p#/proc/}"; done; true`))
	if _, err := strconv.Atoi(pid); err != nil {
		t.Fatalf("carve node's pid in the VM: %q, want one", pid)
	}
	home := strings.TrimPrefix(strings.TrimSpace(vmOut(t, "cat", "/proc/"+pid+"/cgroup")), "0::")
	const cg = "/sys/fs/cgroup/carve-e2e-slow"
	var limits []string
	for _, disk := range []string{"/dev/vda", "/dev/vdb"} { // node-vm.sh's PVs
		var major, minor uint64
		devno := strings.TrimSpace(vmOut(t, "stat", "-L", "-c", "%t %T", disk))
		if _, err := fmt.Sscanf(devno, "%x %x", &major, &minor); err != nil {
			t.Fatalf("device number of %s: %q: %v", disk, devno, err)
		}
		limits = append(limits, fmt.Sprintf("%d:%d rbps=%d", major, minor, rate))
	}
	script := `set -e
cg=$1 pid=$2
shift 2
echo +io >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p "$cg"
for l in "$@"; do echo "$l" >"$cg/io.max"; done
echo "$pid" >"$cg/cgroup.procs"`
	vmOut(t, append([]string{"sh", "-c", script, "sh", cg, pid}, limits...)...)
	t.Logf("carve node (pid %s) reads the VG's disks at %d MiB/s", pid, rate/mi)
	done := false
	return func() {
		if done {
			return
		}
		done = true
		// Every process in the slow cgroup goes back: carve node and the
		// copy it may be running right now (forked while throttled). New
		// forks can race the move, so until the cgroup is empty.
		script := `home=/sys/fs/cgroup$1 cg=$2
for _ in $(seq 100); do
	for p in $(cat "$cg/cgroup.procs"); do echo "$p" >"$home/cgroup.procs" 2>/dev/null || true; done
	rmdir "$cg" 2>/dev/null && exit 0
	sleep 0.1
done
echo "$cg still holds: $(cat "$cg/cgroup.procs")" >&2
exit 1`
		if _, err := h.vm.sh("sh", "-c", script, "sh", home, cg); err != nil {
			t.Errorf("unthrottle carve node: %v", err)
		}
	}
}

// vmOut runs argv in the VM and returns its output; a failure fails t.
func vmOut(t *testing.T, argv ...string) string {
	t.Helper()
	out, err := h.vm.sh(argv...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
