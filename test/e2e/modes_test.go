//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Volume and access modes as workloads use them. Each subtest has its own
// claim and runs beside the others: their pods start on the one VM node at
// the same time, which is also how a node sees them.
func TestVolumeAndAccessModes(t *testing.T) {
	t.Parallel()
	t.Run("RawBlock", testRawBlock)
	t.Run("SharedNonRootAndReadOnly", testSharedNonRootAndReadOnly)
	t.Run("ReadWriteOncePod", testReadWriteOncePod)
}

// A raw block volume (volumeDevices): a container writes the device, a
// second pod's container reads it back, the bytes are on the LV, and no
// filesystem was ever made on it.
func testRawBlock(t *testing.T) {
	t.Parallel()
	const dev, data = "/dev/xvda", "raw block data written by a container"
	claim := pvc("raw", "carve-thick", "64Mi")
	block := corev1.PersistentVolumeBlock
	claim.Spec.VolumeMode = &block
	create(t, claim)
	onDevice := func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.VolumeMounts = nil
		c.VolumeDevices = []corev1.VolumeDevice{{Name: "data", DevicePath: dev}}
	}
	p1 := runPodWith(t, "raw-1", "raw", onDevice)
	if got := inContainer(t, p1, "stat", "-c", "%F", dev); strings.TrimSpace(got) != "block special file" {
		t.Fatalf("%s in the container is a %q", dev, got)
	}
	// 1 MiB in, where a filesystem's superblock would not be.
	inContainer(t, p1, "sh", "-c", `printf %s "$1" | dd of="$2" bs=4096 seek=256 conv=notrunc 2>/dev/null && sync`,
		"sh", data, dev)
	read := []string{"sh", "-c", `dd if="$1" bs=4096 skip=256 count=1 2>/dev/null | head -c "$2"`, "sh"}
	p2 := runPodWith(t, "raw-2", "raw", onDevice)
	if got := inContainer(t, p2, append(read, dev, strconv.Itoa(len(data)))...); got != data {
		t.Errorf("second pod reads %q from the device", got)
	}
	pvName := boundClaim(t, "raw").Spec.VolumeName
	vm := podVM(t, p1)
	if got, err := vm.sh(append(read, "/dev/e2e/"+pvName, strconv.Itoa(len(data)))...); err != nil || got != data {
		t.Errorf("LV %s holds %q (%v)", pvName, got, err)
	}
	// Raw block is never formatted: blkid finds no signature.
	if out, err := vm.sh("blkid", "-p", "-o", "value", "-s", "TYPE", "/dev/e2e/"+pvName); err == nil {
		t.Errorf("blkid finds a filesystem on the raw block volume: %q", out)
	}
	deletePod(t, "raw-1")
	deletePod(t, "raw-2")
	deleteClaim(t, "raw")
}

// One claim, three pods on its node at once: two non-root writers in an
// fsGroup share it (SINGLE_NODE_MULTI_WRITER: each reads what the other
// wrote), and a pod that mounts it read-only reads both and cannot write.
func testSharedNonRootAndReadOnly(t *testing.T) {
	t.Parallel()
	create(t, pvc("shared", "carve-thick", "64Mi"))
	uid, gid, fsGroup := int64(1000), int64(1000), int64(2000)
	nonRoot := func(p *corev1.Pod) {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &gid, FSGroup: &fsGroup}
	}
	readOnly := func(p *corev1.Pod) {
		nonRoot(p)
		p.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly = true
	}
	// Created together: the first one's start stages the volume, the
	// others only publish.
	for name, mutate := range map[string]func(*corev1.Pod){"shared-a": nonRoot, "shared-b": nonRoot, "shared-ro": readOnly} {
		create(t, podWith(name, "shared", mutate))
	}
	a, b := waitRunning(t, "shared-a", 5*time.Minute), waitRunning(t, "shared-b", 5*time.Minute)
	ro := waitRunning(t, "shared-ro", 5*time.Minute)
	if a.Spec.NodeName != b.Spec.NodeName || a.Spec.NodeName != ro.Spec.NodeName {
		t.Fatalf("pods of one claim on %s, %s and %s", a.Spec.NodeName, b.Spec.NodeName, ro.Spec.NodeName)
	}

	// fsGroup: kubelet gave the volume's root to group 2000 (setgid), so
	// the non-root writers can write.
	if got := strings.TrimSpace(inContainer(t, a, "id", "-u")); got != "1000" {
		t.Errorf("shared-a runs as uid %s, want 1000", got)
	}
	if got := strings.TrimSpace(inContainer(t, a, "stat", "-c", "%g %A", "/data")); !strings.HasPrefix(got, "2000 ") || got[len(got)-4] != 's' {
		t.Errorf("/data's group and mode %q, want group 2000 with setgid", got)
	}
	writeData(t, a, "from-a", "written by shared-a")
	writeData(t, b, "from-b", "written by shared-b")
	if got := readData(t, b, "from-a"); got != "written by shared-a" {
		t.Errorf("shared-b reads %q from shared-a's file", got)
	}
	if got := readData(t, a, "from-b"); got != "written by shared-b" {
		t.Errorf("shared-a reads %q from shared-b's file", got)
	}
	if got := strings.TrimSpace(inContainer(t, a, "stat", "-c", "%g", "/data/from-a")); got != "2000" {
		t.Errorf("a file the non-root writer made has group %s, want the fsGroup 2000", got)
	}

	// Read-only: reads both, and a write fails with EROFS.
	for _, f := range []string{"from-a", "from-b"} {
		if got := readData(t, ro, f); !strings.HasPrefix(got, "written by shared-") {
			t.Errorf("shared-ro reads %q from %s", got, f)
		}
	}
	// The shell reports a failed redirection on its own stderr: the group
	// brings it to stdout, which is what inContainer returns.
	out := inContainer(t, ro, "sh", "-c", `{ echo x >/data/from-ro; } 2>&1 && echo WROTE; exit 0`)
	if strings.Contains(out, "WROTE") || !strings.Contains(out, "Read-only file system") {
		t.Errorf("write through the read-only mount: %q, want Read-only file system", out)
	}
	if got := inContainer(t, a, "ls", "/data"); strings.Contains(got, "from-ro") {
		t.Errorf("a file written through the read-only mount exists: %q", got)
	}
	for _, p := range []string{"shared-a", "shared-b", "shared-ro"} {
		deletePod(t, p)
	}
	deleteClaim(t, "shared")
}

// ReadWriteOncePod: a second pod on the claim is not scheduled while the
// first runs (the scheduler says why), and runs once the first is gone,
// reading what it wrote.
func testReadWriteOncePod(t *testing.T) {
	t.Parallel()
	claim := pvc("once", "carve-thick", "64Mi")
	claim.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
	create(t, claim)
	p1 := runPod(t, "once-1", "once")
	writeData(t, p1, "owner", "once-1")
	create(t, pod("once-2", "once"))
	waitEvent(t, "once-2", "FailedScheduling", "ReadWriteOncePod", 2*time.Minute)
	var p2 corev1.Pod
	if err := get(context.Background(), "once-2", &p2); err != nil {
		t.Fatal(err)
	}
	if p2.Spec.NodeName != "" || p2.Status.Phase != corev1.PodPending {
		t.Fatalf("second pod of a ReadWriteOncePod claim: node %q, phase %s", p2.Spec.NodeName, p2.Status.Phase)
	}
	deletePod(t, "once-1")
	p := waitRunning(t, "once-2", 5*time.Minute)
	if got := readData(t, p, "owner"); got != "once-1" {
		t.Errorf("once-2 reads %q", got)
	}
	deletePod(t, "once-2")
	deleteClaim(t, "once")
}

// podWith is pod with mutate applied; runPodWith also waits until it runs.
func podWith(name, claim string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := pod(name, claim)
	mutate(p)
	return p
}

func runPodWith(t *testing.T, name, claim string, mutate func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	create(t, podWith(name, claim, mutate))
	return waitRunning(t, name, 5*time.Minute)
}

// onNode puts a pod on node, as a user pins a workload with a node
// selector: a restore or a clone of a volume must run where its source
// is, since Carve makes them on the source's node only.
func onNode(node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	}
}

// blockPodOn runs, on node, a pod using a new raw block claim of class
// for each name and size, at /dev/NAME.
func blockPodOn(t *testing.T, name, node, class string, claims map[string]string) *corev1.Pod {
	t.Helper()
	p := pod(name, "")
	p.Spec.Volumes = nil
	c := &p.Spec.Containers[0]
	c.VolumeMounts = nil
	block := corev1.PersistentVolumeBlock
	for claim, size := range claims {
		cl := pvc(claim, class, size)
		cl.Spec.VolumeMode = &block
		create(t, cl)
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: claim, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		c.VolumeDevices = append(c.VolumeDevices, corev1.VolumeDevice{Name: claim, DevicePath: "/dev/" + claim})
	}
	onNode(node)(p)
	create(t, p)
	return waitRunning(t, name, 5*time.Minute)
}
