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
// when the test ends. Carve started in it (StartCarveIn), and the commands
// it runs, see slow devices: the kernel throttles the bios they submit,
// including those device-mapper remaps onto the disks and the
// write-zeroes requests of BLKZEROOUT. The VM's virtio disks are otherwise
// far too fast (zeroing is a hole punch on the host) for work to outlast a
// timeout.
func SlowCgroup(t *testing.T, bytesPerSec int64, disks ...string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); errors.Is(err, os.ErrNotExist) {
		if err := unix.Mount("cgroup2", cgroupRoot, "cgroup2", 0, ""); err != nil {
			t.Fatalf("mount cgroup2 on %s: %v", cgroupRoot, err)
		}
	}
	if err := os.WriteFile(filepath.Join(cgroupRoot, "cgroup.subtree_control"), []byte("+io"), 0); err != nil {
		t.Fatalf("enable the io controller: %v", err)
	}
	dir := filepath.Join(cgroupRoot, "carve-"+sanitize(t.Name()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create cgroup: %v", err)
	}
	// Registered before the processes that join it, so it runs after their
	// cleanups (LIFO): a cgroup with members cannot be removed.
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove cgroup %s: %v", dir, err)
		}
	})
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
