package nodefs

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	utilexec "k8s.io/utils/exec"

	"carve.dev/carve/test/loopdev"
)

const mib = int64(1) << 20

// requireLoop skips tests that need root, loop devices and the mkfs tools.
func requireLoop(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to attach loop devices and mount (run go test as root)")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "mkfs.xfs", "blkid", "resize2fs", "xfs_growfs", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s not installed (apt: util-linux e2fsprogs xfsprogs)", tool)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("skipping: no loop device support: %v", err)
	}
}

// newLoop attaches a sparse file of size bytes to a free loop device
// (loopdev.New), once requireLoop found the tools. It returns the device
// and the backing file.
func newLoop(t *testing.T, size int64) (dev, file string) {
	t.Helper()
	requireLoop(t)
	return loopdev.New(t, size)
}

// growLoop grows the backing file and tells the loop driver (losetup -c).
func growLoop(t *testing.T, dev, file string, size int64) {
	t.Helper()
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
	run(t, "losetup", "-c", dev)
}

// cleanupMounts unmounts everything stacked on path at the end of the test,
// with the system tools so that a bug under test cannot leak mounts. It must
// be called before mounting, so it runs before the TempDir removal.
func cleanupMounts(t *testing.T, path string) {
	t.Helper()
	t.Cleanup(func() {
		for range 10 {
			if exec.Command("mountpoint", "-q", path).Run() != nil {
				return
			}
			if out, err := exec.Command("umount", path).CombinedOutput(); err != nil {
				t.Logf("umount %s: %v: %s; trying lazy", path, err, out)
				_ = exec.Command("umount", "-l", path).Run()
			}
		}
		t.Errorf("could not unmount %s", path)
	})
}

// mkfs formats dev by hand, as if someone else had.
func mkfs(t *testing.T, fsType, dev string) {
	t.Helper()
	force := "-F"
	if fsType == "xfs" {
		force = "-f"
	}
	run(t, "mkfs."+fsType, "-q", force, dev)
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// stage formats and mounts dev at a new directory and returns it.
func stage(t *testing.T, m *Mounter, dev, fsType string) string {
	t.Helper()
	target := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, target)
	if _, err := m.FormatAndMount(ctxT(t), dev, target, fsType, MkfsOptions{}, nil); err != nil {
		t.Fatalf("FormatAndMount: %v", err)
	}
	return target
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// recordingExec runs commands for real and remembers their names.
type recordingExec struct {
	utilexec.Interface
	mu   sync.Mutex
	cmds []string
}

func newRecordingExec() *recordingExec { return &recordingExec{Interface: utilexec.New()} }

func (r *recordingExec) Command(name string, args ...string) utilexec.Cmd {
	r.record(name)
	return r.Interface.Command(name, args...)
}

func (r *recordingExec) CommandContext(ctx context.Context, name string, args ...string) utilexec.Cmd {
	r.record(name)
	return r.Interface.CommandContext(ctx, name, args...)
}

func (r *recordingExec) record(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, name)
}

// count returns how many commands starting with prefix ran.
func (r *recordingExec) count(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.cmds {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// anyBlockDevice finds a block device node for tests that only stat it.
func anyBlockDevice(t *testing.T) string {
	t.Helper()
	for _, pattern := range []string{"/dev/loop[0-9]*", "/dev/sd?", "/dev/vd?", "/dev/nvme*n1", "/dev/xvd?"} {
		matches, _ := filepath.Glob(pattern)
		for _, p := range matches {
			if CheckBlockDevice(p) == nil {
				return p
			}
		}
	}
	t.Skip("skipping: no block device node visible in /dev")
	return ""
}

// deviceOfMount returns the source of the mount at path, as mountinfo
// records it (the name mount(8) was given after canonicalisation, e.g.
// /dev/mapper/vg-lv for /dev/vg/lv: compare it with sameDevice).
func deviceOfMount(path string) (string, error) {
	mi, err := mountAt(path)
	if err != nil {
		return "", err
	}
	return mi.Source, nil
}

// sameDevice reports whether two paths name the same block device, by
// device number, whatever symlinks or node names lead to it.
func sameDevice(a, b string) (bool, error) {
	ra, err := deviceNumber(a)
	if err != nil {
		return false, err
	}
	rb, err := deviceNumber(b)
	if err != nil {
		return false, err
	}
	return ra == rb, nil
}
