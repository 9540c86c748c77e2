// Package loopdev attaches loop devices for tests that need a real block
// device on this machine's own kernel (mounts, lvm2 metadata, zeroing).
package loopdev

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// New attaches a sparse file of size bytes in the test's temporary
// directory to a free loop device, and detaches it when the test ends;
// a device left attached outlives the test and shows up to every later
// lvm2 scan of the machine. It skips the test without root, losetup or
// loop support, or when losetup cannot attach. It returns the device and
// its backing file.
func New(t testing.TB, size int64) (dev, file string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to attach loop devices")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("skipping: losetup not installed (apt: util-linux)")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("skipping: no loop device support: %v", err)
	}
	file = filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		t.Skipf("skipping: losetup cannot attach a loop device: %v: %s", err, out)
	}
	dev = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("detach %s: %v: %s", dev, err, out)
		}
	})
	return dev, file
}
