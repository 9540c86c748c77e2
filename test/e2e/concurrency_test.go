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
	"k8s.io/apimachinery/pkg/types"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/api/v1alpha1"
)

// A clone's copy must not hold up other volumes of its node.
// A 1 GiB thick claim is cloned while carve node's reads are throttled;
// meanwhile another claim's pod on the same node must be provisioned,
// attached, staged and published, i.e. Running, while the clone's
// LogicalVolume is still Copying. Then the throttle goes, and the clone
// runs with the source's data.
//
// What is asserted is the order (the other pod runs before the
// copy ends), never how fast; so the copy must outlast the other pod
// however slow the machine is. Until the copy has started, carve node reads
// the VG's disks at 8 MiB/s (unthrottled, the emulated VM copies 1 GiB in
// about half a minute, before the test could see it Copying). Once it
// copies, only the copy's own source, the clone's frozen point, stays
// throttled, at 256 KiB/s (1 GiB would take over an hour), and the disks
// are free again: the other volume's lvm2 commands and mkfs never read
// that device, so they wait behind nothing of the copy's, and a loaded
// machine makes the other pod later, not the copy earlier. The waits are
// hang guards (hangGuard).
func TestPublishWhileACloneCopies(t *testing.T) {
	fullRunOnly(t)
	ctx := context.Background()
	create(t, pvc("copysrc", "carve-thick", "1Gi"))
	p := runPodWith(t, "copysrc-1", "copysrc", onNode(vmNode))
	writeData(t, p, "state", "cloned")

	slow := throttleNode(t)
	defer slow.undo()
	slow.limit(t, []string{"/dev/vda", "/dev/vdb"}, 8*mi) // node-vm.sh's PVs
	clone := pvc("copyclone", "carve-thick", "1Gi")
	clone.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "copysrc"}
	create(t, clone)
	create(t, podWith("copyclone-1", "copyclone", onNode(vmNode)))
	cloneLV := claimLV(clone)
	wait(t, "the clone's LogicalVolume Copying", 3*time.Minute, func(ctx context.Context) (bool, error) {
		return copying(ctx, cloneLV)
	})
	// The claim's tenant reads how far the copy has got.
	tenantSees(t, clone, "Copying", "% done")
	slow.limit(t, []string{dmPath(t, "e2e", cloneLV+"-frz")}, 256<<10) // lvmvol's frozenName
	slow.limit(t, []string{"/dev/vda", "/dev/vdb"}, 0)

	start := time.Now()
	create(t, pvc("copybusy", "carve-thick", "64Mi"))
	runPodWithin(t, "copybusy-1", "copybusy", 5*time.Minute)
	t.Logf("another pod ran %v after it was made, while the clone copied", time.Since(start).Round(time.Second))
	if still, err := copying(ctx, cloneLV); err != nil || !still {
		t.Fatalf("the clone's copy ended before the other pod ran (%v): the throttle was too weak, this proves nothing", err)
	}

	slow.undo()
	p2 := waitRunning(t, "copyclone-1", 8*time.Minute)
	if got := readData(t, p2, "state"); got != "cloned" {
		t.Errorf("the clone holds %q", got)
	}
	for _, name := range []string{"copybusy", "copyclone", "copysrc"} {
		deletePod(t, name+"-1")
		deleteClaim(t, name)
	}
}

// runPodWithin is runPod on carve-vm (the throttled node) with another
// hang guard.
func runPodWithin(t *testing.T, name, claim string, timeout time.Duration) {
	t.Helper()
	create(t, podWith(name, claim, onNode(vmNode)))
	waitRunning(t, name, timeout)
}

// claimLV is the name of a claim's volume before it is bound:
// csi-provisioner names the volume pvc-<claim UID>, and so are its
// LogicalVolume and LV (volume.LVName keeps such names).
func claimLV(c *corev1.PersistentVolumeClaim) string { return "pvc-" + string(c.UID) }

// copying tells whether LogicalVolume name exists and says its data is
// being copied.
func copying(ctx context.Context, name string) (bool, error) {
	var lv v1alpha1.LogicalVolume
	if err := h.kc.Get(ctx, types.NamespacedName{Name: name}, &lv); err != nil {
		_, err = gone(err)
		return false, err
	}
	c := lv.Ready()
	return lv.Status.VolumeID == "" && c != nil && c.Reason == agent.ReasonCopying, nil
}

// dmPath is the device-mapper node of LV vg/lv in the VM: its name doubles
// each dash of the VG's and the LV's, and joins them with one.
func dmPath(t *testing.T, vg, lv string) string {
	t.Helper()
	name := strings.ReplaceAll(vg, "-", "--") + "-" + strings.ReplaceAll(lv, "-", "--")
	devno := strings.TrimSpace(vmOut(t, "dmsetup", "info", "-c", "--noheadings", "-o", "major,minor", name))
	if _, err := fmt.Sscanf(devno, "%d:%d", new(int), new(int)); err != nil {
		t.Fatalf("device of %s/%s (%s) in the VM: %q: %v", vg, lv, name, devno, err)
	}
	return "/dev/mapper/" + name
}

// slowNode is carve node in the VM moved into a cgroup whose io.max limits
// its reads (its commands, forked after, inherit it).
type slowNode struct {
	t       *testing.T
	home    string   // carve node's own cgroup, under /sys/fs/cgroup
	limited []string // major:minor of every device given a limit
	done    bool
}

const slowCgroup = "/sys/fs/cgroup/carve-e2e-slow"

// throttleNode moves carve node into the slow cgroup, no limit set yet.
func throttleNode(t *testing.T) *slowNode {
	t.Helper()
	pid := strings.TrimSpace(vmOut(t, "sh", "-c",
		`for p in /proc/[0-9]*; do [ "$(cat "$p/comm" 2>/dev/null)" = carve ] && echo "${p#/proc/}"; done; true`))
	if _, err := strconv.Atoi(pid); err != nil {
		t.Fatalf("carve node's pid in the VM: %q, want one", pid)
	}
	home := strings.TrimPrefix(strings.TrimSpace(vmOut(t, "cat", "/proc/"+pid+"/cgroup")), "0::")
	vmOut(t, "sh", "-c", `set -e
echo +io >/sys/fs/cgroup/cgroup.subtree_control
mkdir -p "$1"
echo "$2" >"$1/cgroup.procs"`, "sh", slowCgroup, pid)
	return &slowNode{t: t, home: home}
}

// limit sets the read rate of each device to rate bytes/s, 0 for none.
func (s *slowNode) limit(t *testing.T, devices []string, rate int64) {
	t.Helper()
	bps := "max"
	if rate > 0 {
		bps = fmt.Sprint(rate)
	}
	for _, dev := range devices {
		var major, minor uint64
		devno := strings.TrimSpace(vmOut(t, "stat", "-L", "-c", "%t %T", dev))
		if _, err := fmt.Sscanf(devno, "%x %x", &major, &minor); err != nil {
			t.Fatalf("device number of %s: %q: %v", dev, devno, err)
		}
		mm := fmt.Sprintf("%d:%d", major, minor)
		vmOut(t, "sh", "-c", `echo "$2" >"$1/io.max"`, "sh", slowCgroup, mm+" rbps="+bps)
		s.limited = append(s.limited, mm)
		t.Logf("carve node reads %s at %s bytes/s", dev, bps)
	}
}

// undo lifts every limit first, which lets the reads queued under them
// go, then moves every process of the slow cgroup back: carve node and
// the commands it may be running right now (forked while throttled). New
// forks can race the move, so until the cgroup is empty. Once.
func (s *slowNode) undo() {
	if s.done {
		return
	}
	s.done = true
	script := `home=/sys/fs/cgroup$1 cg=$2
shift 2
for mm in "$@"; do echo "$mm rbps=max" >"$cg/io.max"; done
for _ in $(seq 100); do
	for p in $(cat "$cg/cgroup.procs"); do echo "$p" >"$home/cgroup.procs" 2>/dev/null || true; done
	rmdir "$cg" 2>/dev/null && exit 0
	sleep 0.1
done
echo "$cg still holds: $(cat "$cg/cgroup.procs")" >&2
exit 1`
	if _, err := nodeVM(s.t, vmNode).sh(append([]string{"sh", "-c", script, "sh", s.home, slowCgroup}, s.limited...)...); err != nil {
		s.t.Errorf("unthrottle carve node: %v", err)
	}
}

// vmOut runs argv on VM node carve-vm and returns its output; a failure
// fails t. The tests that use it pin their pods there (onNode).
func vmOut(t *testing.T, argv ...string) string {
	t.Helper()
	out, err := nodeVM(t, vmNode).sh(argv...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
