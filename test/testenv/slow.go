package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where cgroup v2 lives; the test VM's kernel has it but
// nothing mounts it there.
const cgroupRoot = "/sys/fs/cgroup"

// SlowCgroup makes a cgroup v2 whose processes may write to each of disks
// at bytesPerSec at most (the io controller's io.max wbps), and removes it
// when the test ends. Carve started in it (StartCarve with Options.Cgroup), and the commands
// it runs, see slow devices: the kernel throttles the bios they submit,
// including those device-mapper remaps onto the disks and the
// write-zeroes requests of BLKZEROOUT. The VM's virtio disks are otherwise
// far too fast (zeroing is a hole punch on the host) for work to outlast a
// timeout.
func SlowCgroup(t *testing.T, bytesPerSec int64, disks ...string) string {
	t.Helper()
	dir := ioCgroup(t, "carve-"+sanitize(t.Name()))
	for _, d := range disks {
		var st unix.Stat_t
		if err := unix.Stat(d, &st); err != nil {
			t.Fatalf("stat %s: %v", d, err)
		}
		limit := fmt.Sprintf("%d:%d wbps=%d", unix.Major(st.Rdev), unix.Minor(st.Rdev), bytesPerSec)
		if err := os.WriteFile(filepath.Join(dir, "io.max"), []byte(limit), 0); err != nil {
			t.Fatalf("throttle %s (%s): %v", d, limit, err)
		}
	}
	return dir
}

// PodCgroup makes the cgroup v2 of pod uid where kubelet's cgroupfs driver
// puts a Burstable pod's (kubepods/burstable/pod<uid>), with the io
// controller on down to it, and removes it when the test ends.
func PodCgroup(t *testing.T, uid string) string {
	t.Helper()
	parent := ioCgroup(t, "kubepods")
	qos := filepath.Join(parent, "burstable")
	mkCgroup(t, qos)
	enableIO(t, parent)
	enableIO(t, qos)
	dir := filepath.Join(qos, "pod"+uid)
	mkCgroup(t, dir)
	return dir
}

// ioCgroup makes cgroup v2 directory name under the root, with the io
// controller on for it (cgroup2 mounted where the VM has not).
func ioCgroup(t *testing.T, name string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); errors.Is(err, os.ErrNotExist) {
		if err := unix.Mount("cgroup2", cgroupRoot, "cgroup2", 0, ""); err != nil {
			t.Fatalf("mount cgroup2 on %s: %v", cgroupRoot, err)
		}
	}
	enableIO(t, cgroupRoot)
	dir := filepath.Join(cgroupRoot, name)
	mkCgroup(t, dir)
	return dir
}

func enableIO(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+io"), 0); err != nil {
		t.Fatalf("enable the io controller below %s: %v", dir, err)
	}
}

// mkCgroup makes a cgroup and removes it when the test ends. Registered
// before the processes that join it, the removal runs after their
// cleanups (LIFO): a cgroup with members cannot be removed.
func mkCgroup(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove cgroup %s: %v", dir, err)
		}
	})
}
