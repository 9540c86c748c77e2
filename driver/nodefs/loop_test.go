package nodefs

// Tests against real loop devices, ext4 and xfs. They skip unless run as
// root with losetup and the mkfs tools installed (see requireLoop).

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"carve.dev/carve/driver/volume"
)

// minSize is the smallest device each filesystem is tested on (xfs
// refuses filesystems under 300 MiB).
var minSize = map[string]int64{"ext4": 64 * mib, "xfs": 300 * mib}

func TestFormatAndMountRoundTrip(t *testing.T) {
	for _, fsType := range []string{"ext4", "xfs"} {
		t.Run(fsType, func(t *testing.T) {
			dev, _ := newLoop(t, minSize[fsType])
			rec := newRecordingExec()
			m := New(rec)
			target := filepath.Join(t.TempDir(), "staging")
			cleanupMounts(t, target)
			if formatted, err := m.FormatAndMount(ctxT(t), dev, target, fsType, MkfsOptions{}, nil); err != nil || !formatted {
				t.Fatalf("FormatAndMount of a blank device: formatted %v, %v", formatted, err)
			}

			if got, err := m.FilesystemType(ctxT(t), dev); err != nil || got != fsType {
				t.Fatalf("FilesystemType = %q, %v", got, err)
			}
			assertMountOf(t, m, target, dev)
			if rec.count("mkfs.") != 1 {
				t.Fatalf("mkfs ran %d times, want 1", rec.count("mkfs."))
			}
			// Second call: already mounted, nothing to do.
			if formatted, err := m.FormatAndMount(ctxT(t), dev, target, fsType, MkfsOptions{}, nil); err != nil || formatted {
				t.Fatalf("idempotent FormatAndMount: formatted %v, %v", formatted, err)
			}
			writeFile(t, filepath.Join(target, "data"), "survives")

			// Unmount, then mount again: the data must still be there.
			if err := m.Unmount(target); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(target); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("target not removed: %v", err)
			}
			if formatted, err := m.FormatAndMount(ctxT(t), dev, target, fsType, MkfsOptions{}, nil); err != nil || formatted {
				t.Fatalf("remount: formatted %v, %v; want a mount of the filesystem there", formatted, err)
			}
			if got := readFile(t, filepath.Join(target, "data")); got != "survives" {
				t.Fatalf("data after remount = %q", got)
			}
			if rec.count("mkfs.") != 1 {
				t.Fatalf("device reformatted: mkfs ran %d times", rec.count("mkfs."))
			}
		})
	}
}

func assertMountOf(t *testing.T, m *Mounter, target, dev string) {
	t.Helper()
	if ok, err := m.IsMountPoint(target); err != nil || !ok {
		t.Fatalf("IsMountPoint(%s) = %t, %v", target, ok, err)
	}
	src, err := deviceOfMount(target)
	if err != nil {
		t.Fatal(err)
	}
	if same, err := sameDevice(src, dev); err != nil || !same {
		t.Fatalf("DeviceOfMount(%s) = %s, want %s (%v)", target, src, dev, err)
	}
}

func TestFormatAndMountNeverReformats(t *testing.T) {
	dev, _ := newLoop(t, minSize["xfs"])
	mkfs(t, "ext4", dev)
	rec := newRecordingExec()
	m := New(rec)
	target := stage(t, m, dev, "ext4")
	writeFile(t, filepath.Join(target, "precious"), "keep me")
	if err := m.Unmount(target); err != nil {
		t.Fatal(err)
	}

	_, err := m.FormatAndMount(ctxT(t), dev, target, "xfs", MkfsOptions{}, nil)
	if !errors.Is(err, volume.ErrFilesystemMismatch) {
		t.Fatalf("ext4 device asked as xfs: err = %v, want volume.ErrFilesystemMismatch", err)
	}
	if ok, _ := m.IsMountPoint(target); ok {
		t.Fatal("mismatched device got mounted")
	}
	if rec.count("mkfs.") != 0 {
		t.Fatal("mkfs ran on a formatted device")
	}
	if _, err := m.FormatAndMount(ctxT(t), dev, target, "ext4", MkfsOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(target, "precious")); got != "keep me" {
		t.Fatalf("data = %q", got)
	}
}

func TestFormatAndMountRefusesPartitionTable(t *testing.T) {
	dev, _ := newLoop(t, 64*mib)
	writeMBR(t, dev)
	rec := newRecordingExec()
	m := New(rec)
	target := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, target)
	_, err := m.FormatAndMount(ctxT(t), dev, target, "ext4", MkfsOptions{}, nil)
	if !errors.Is(err, volume.ErrFilesystemMismatch) || rec.count("mkfs.") != 0 {
		t.Fatalf("partitioned device: err = %v, mkfs runs = %d", err, rec.count("mkfs."))
	}
}

// writeMBR writes a DOS partition table with one Linux partition.
func writeMBR(t *testing.T, dev string) {
	t.Helper()
	mbr := make([]byte, 512)
	entry := mbr[446:462]
	entry[4] = 0x83                                    // Linux
	copy(entry[8:12], []byte{0x00, 0x08, 0x00, 0x00})  // start LBA 2048
	copy(entry[12:16], []byte{0x00, 0x00, 0x01, 0x00}) // 65536 sectors
	mbr[510], mbr[511] = 0x55, 0xAA
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Write(mbr); err != nil {
		t.Fatal(err)
	}
	if out := run(t, "blkid", "-p", "-o", "export", dev); !strings.Contains(out, "PTTYPE=dos") {
		t.Fatalf("test MBR not recognised: %s", out)
	}
}

func TestFormatAndMountConflicts(t *testing.T) {
	devA, _ := newLoop(t, 64*mib)
	devB, _ := newLoop(t, 64*mib)
	m := New(nil)
	target := stage(t, m, devA, "ext4")

	_, err := m.FormatAndMount(ctxT(t), devB, target, "ext4", MkfsOptions{}, nil)
	if !errors.Is(err, volume.ErrMountConflict) {
		t.Fatalf("other device on target: err = %v", err)
	}
	_, err = m.FormatAndMount(ctxT(t), devA, target, "ext4", MkfsOptions{}, []string{"ro"})
	if !errors.Is(err, volume.ErrMountConflict) {
		t.Fatalf("same device, read-only asked on rw mount: err = %v", err)
	}
	// A bind of a subdirectory of devA's filesystem is not devA's root.
	sub := filepath.Join(target, "sub")
	if err := os.Mkdir(sub, 0o750); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other")
	cleanupMounts(t, other)
	if err := m.BindMount(sub, other, false, nil); err != nil {
		t.Fatal(err)
	}
	_, err = m.FormatAndMount(ctxT(t), devA, other, "ext4", MkfsOptions{}, nil)
	if !errors.Is(err, volume.ErrMountConflict) {
		t.Fatalf("subdirectory bind on target: err = %v", err)
	}
}

func TestFormatAndMountReadOnly(t *testing.T) {
	dev, _ := newLoop(t, 64*mib)
	m := New(nil)
	target := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, target)
	// A blank device cannot be formatted in read-only mode.
	if _, err := m.FormatAndMount(ctxT(t), dev, target, "ext4", MkfsOptions{}, []string{"ro"}); err == nil {
		t.Fatal("blank device mounted read-only")
	}
	mkfs(t, "ext4", dev)
	if _, err := m.FormatAndMount(ctxT(t), dev, target, "ext4", MkfsOptions{}, []string{"ro"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.FormatAndMount(ctxT(t), dev, target, "ext4", MkfsOptions{}, []string{"ro"}); err != nil {
		t.Fatalf("idempotent ro: %v", err)
	}
	assertEROFS(t, filepath.Join(target, "x"))
}

func assertEROFS(t *testing.T, path string) {
	t.Helper()
	err := os.WriteFile(path, []byte("x"), 0o600)
	if !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write to %s: err = %v, want EROFS", path, err)
	}
}

func TestBindMountDirectory(t *testing.T) {
	dev, _ := newLoop(t, 64*mib)
	m := New(nil)
	staging := stage(t, m, dev, "ext4")
	dir := t.TempDir()
	rw, ro := filepath.Join(dir, "pods", "rw"), filepath.Join(dir, "pods", "ro")
	cleanupMounts(t, rw)
	cleanupMounts(t, ro)
	// The CO makes the directory it hands out targets in; Carve does not.
	if err := m.BindMount(staging, rw, false, nil); !errors.Is(err, volume.ErrUnsafeTarget) {
		t.Fatalf("target in a missing directory: err = %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "pods"), 0o750); err != nil {
		t.Fatal(err)
	}

	if err := m.BindMount(staging, rw, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.BindMount(staging, rw, false, nil); err != nil {
		t.Fatalf("idempotent rw: %v", err)
	}
	assertMountOf(t, m, rw, dev)
	writeFile(t, filepath.Join(rw, "through-rw"), "hello")
	if got := readFile(t, filepath.Join(staging, "through-rw")); got != "hello" {
		t.Fatalf("staging sees %q", got)
	}

	if err := m.BindMount(staging, ro, true, []string{"nosuid"}); err != nil {
		t.Fatal(err)
	}
	if err := m.BindMount(staging, ro, true, []string{"nosuid"}); err != nil {
		t.Fatalf("idempotent ro: %v", err)
	}
	if got := readFile(t, filepath.Join(ro, "through-rw")); got != "hello" {
		t.Fatalf("ro bind sees %q", got)
	}
	assertEROFS(t, filepath.Join(ro, "x"))
	// The ro remount must not have made the staging mount read-only.
	writeFile(t, filepath.Join(staging, "still-rw"), "yes")

	if err := m.BindMount(staging, ro, false, nil); !errors.Is(err, volume.ErrMountConflict) {
		t.Errorf("rw asked on ro bind: err = %v", err)
	}
	if err := m.BindMount(t.TempDir(), rw, false, nil); !errors.Is(err, volume.ErrMountConflict) {
		t.Errorf("other source on bind: err = %v", err)
	}

	for _, p := range []string{rw, ro} {
		if err := m.Unmount(p); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s not removed: %v", p, err)
		}
	}
	if got := readFile(t, filepath.Join(staging, "still-rw")); got != "yes" {
		t.Fatalf("staging after unpublish: %q", got)
	}
}

func TestBindMountBlockDevice(t *testing.T) {
	dev, _ := newLoop(t, 64*mib)
	m := New(nil)
	target := filepath.Join(t.TempDir(), "pods", "vol", "dev")
	cleanupMounts(t, target)
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil { // the CO's part
		t.Fatal(err)
	}

	if err := m.BindMount(dev, target, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.BindMount(dev, target, false, nil); err != nil {
		t.Fatalf("idempotent: %v", err)
	}
	fi, err := os.Stat(target)
	if err != nil || fi.Mode()&fs.ModeDevice == 0 {
		t.Fatalf("target is not the device: %v, %v", fi.Mode(), err)
	}
	if ok, err := m.IsMountPoint(target); err != nil || !ok {
		t.Fatalf("IsMountPoint = %t, %v", ok, err)
	}
	if same, err := sameDevice(target, dev); err != nil || !same {
		t.Fatalf("SameDevice = %t, %v", same, err)
	}
	if size, err := BlockSize(target); err != nil || size != 64*mib {
		t.Fatalf("BlockSize(bind) = %d, %v", size, err)
	}
	other, _ := newLoop(t, 64*mib)
	if err := m.BindMount(other, target, false, nil); !errors.Is(err, volume.ErrMountConflict) {
		t.Fatalf("other device on target: err = %v", err)
	}
	if err := m.BindMount(dev, target, true, nil); !errors.Is(err, volume.ErrMountConflict) {
		t.Fatalf("ro asked on rw bind: err = %v", err)
	}
	roTarget := filepath.Join(t.TempDir(), "ro-dev")
	cleanupMounts(t, roTarget)
	for range 2 { // second: idempotent
		if err := m.BindMount(dev, roTarget, true, nil); err != nil {
			t.Fatal(err)
		}
	}
	if ro, err := mountReadOnly(roTarget); err != nil || !ro {
		t.Fatalf("ro device bind: read-only = %t, %v", ro, err)
	}
	if err := m.BindMount(dev, roTarget, false, nil); !errors.Is(err, volume.ErrMountConflict) {
		t.Fatalf("rw asked on ro device bind: err = %v", err)
	}
	// A directory already at the target cannot take a device.
	dirTarget := filepath.Join(t.TempDir(), "dir")
	if err := os.Mkdir(dirTarget, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := m.BindMount(dev, dirTarget, false, nil); err == nil {
		t.Fatal("device bound onto a directory")
	}
	for range 2 {
		if err := m.Unmount(target); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("target file not removed: %v", err)
	}
}

func TestBlockSize(t *testing.T) {
	dev, _ := newLoop(t, 100*mib+4096)
	if size, err := BlockSize(dev); err != nil || size != 100*mib+4096 {
		t.Fatalf("BlockSize = %d, %v", size, err)
	}
}

func TestPathStats(t *testing.T) {
	const size = 64 * mib
	dev, _ := newLoop(t, size)
	m := New(nil)
	target := stage(t, m, dev, "ext4")
	before, err := PathStats(target)
	if err != nil {
		t.Fatal(err)
	}
	if before.TotalBytes < size*8/10 || before.TotalBytes > size {
		t.Errorf("TotalBytes %d not near device size %d", before.TotalBytes, size)
	}
	if before.AvailableBytes <= 0 || before.AvailableBytes > before.TotalBytes-before.UsedBytes {
		t.Errorf("AvailableBytes %d vs total %d used %d", before.AvailableBytes, before.TotalBytes, before.UsedBytes)
	}
	if before.TotalInodes <= 0 || before.UsedInodes+before.FreeInodes != before.TotalInodes || before.UsedInodes <= 0 {
		t.Errorf("inodes: %+v", before)
	}
	writeFile(t, filepath.Join(target, "big"), strings.Repeat("x", int(8*mib)))
	syscall.Sync()
	after, err := PathStats(target)
	if err != nil {
		t.Fatal(err)
	}
	if grew := after.UsedBytes - before.UsedBytes; grew < 8*mib {
		t.Errorf("UsedBytes grew by %d after writing 8 MiB", grew)
	}
	if after.UsedInodes != before.UsedInodes+1 {
		t.Errorf("UsedInodes %d → %d after one file", before.UsedInodes, after.UsedInodes)
	}
}

func TestResizeFS(t *testing.T) {
	for _, fsType := range []string{"ext4", "xfs"} {
		t.Run(fsType, func(t *testing.T) {
			small := minSize[fsType]
			big := small + 128*mib
			dev, file := newLoop(t, small)
			m := New(nil)
			target := stage(t, m, dev, fsType)
			writeFile(t, filepath.Join(target, "data"), "kept")
			before, err := PathStats(target)
			if err != nil {
				t.Fatal(err)
			}

			growLoop(t, dev, file, big)
			if size, err := BlockSize(dev); err != nil || size != big {
				t.Fatalf("BlockSize after grow = %d, %v; want %d", size, err, big)
			}
			if fsType == "ext4" && !hasCapability(t, unix.CAP_SYS_RESOURCE) {
				// The kernel's ext4 online resize demands CAP_SYS_RESOURCE.
				err := m.ResizeFS(ctxT(t), dev, target)
				if err == nil || !strings.Contains(err.Error(), "Permission denied") {
					t.Fatalf("ResizeFS without CAP_SYS_RESOURCE: err = %v, want permission error", err)
				}
				t.Skip("skipping the rest: ext4 online resize needs CAP_SYS_RESOURCE, which this process lacks (the error path was checked)")
			}
			for i := range 2 { // second run: already full size, still nil
				if err := m.ResizeFS(ctxT(t), dev, target); err != nil {
					t.Fatalf("ResizeFS #%d: %v", i+1, err)
				}
			}
			after, err := PathStats(target)
			if err != nil {
				t.Fatal(err)
			}
			if grew := after.TotalBytes - before.TotalBytes; grew < 128*mib*9/10 {
				t.Errorf("TotalBytes grew by %s, want ~128 MiB", fmt.Sprint(grew))
			}
			if readFile(t, filepath.Join(target, "data")) != "kept" {
				t.Error("data lost in resize")
			}
		})
	}
}

func TestUnmountIdempotent(t *testing.T) {
	dev, _ := newLoop(t, 64*mib)
	m := New(nil)
	target := stage(t, m, dev, "ext4")
	for i := range 3 {
		if err := m.Unmount(target); err != nil {
			t.Fatalf("Unmount #%d: %v", i+1, err)
		}
	}
	if ok, err := m.IsMountPoint(target); ok || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after Unmount: IsMountPoint = %t, %v", ok, err)
	}
}

func TestWaitForLoopDevice(t *testing.T) {
	dev, _ := newLoop(t, 64*mib)
	rdev, err := New(nil).WaitForDevice(ctxT(t), dev)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := DeviceNumber(dev); rdev != want || rdev == 0 {
		t.Fatalf("WaitForDevice = %d, want %d", rdev, want)
	}
}

// hasCapability reads the effective capability set of this process.
func hasCapability(t *testing.T, capability int) bool {
	t.Helper()
	status := readFile(t, "/proc/self/status")
	for _, line := range strings.Split(status, "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return eff&(1<<capability) != 0
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}

// bindThenFail binds for real, then reports the remount as failed, the way
// mount-utils does when its second (remount) step fails.
type bindThenFail struct{ mount.Interface }

func (b bindThenFail) Mount(source, target, _ string, _ []string) error {
	if err := b.Interface.Mount(source, target, "", []string{"bind"}); err != nil {
		return err
	}
	return errors.New("simulated remount failure")
}

func TestBindMountUndoesHalfDoneBind(t *testing.T) {
	requireLoop(t)
	m := New(nil)
	m.mounter = bindThenFail{m.mounter}
	source := t.TempDir()
	target := filepath.Join(t.TempDir(), "pub")
	cleanupMounts(t, target)
	if err := m.BindMount(source, target, true, nil); err == nil {
		t.Fatal("BindMount succeeded")
	}
	if ok, err := m.IsMountPoint(target); ok || err != nil {
		t.Fatalf("half-done bind left behind: mounted=%t, %v", ok, err)
	}
}

// TestMountsOf finds every mount point that exposes a device: its staging
// mount, a bind of it at a path with a space (escaped in mountinfo), and
// a bind of the device node itself; and nothing of another device.
func TestMountsOf(t *testing.T) {
	dev, _ := newLoop(t, 64*mib)
	other, _ := newLoop(t, 64*mib)
	m := New(utilexec.New())
	staging := stage(t, m, dev, "ext4")
	published := filepath.Join(t.TempDir(), "pod volume")
	cleanupMounts(t, published)
	if err := m.BindMount(staging, published, false, nil); err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(t.TempDir(), "block")
	cleanupMounts(t, node)
	if err := m.BindMount(dev, node, false, nil); err != nil {
		t.Fatal(err)
	}
	rdev, err := DeviceNumber(dev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := MountsOf(rdev)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{staging, published, node}
	for i, p := range want {
		if want[i], err = filepath.EvalSymlinks(p); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("MountsOf(%s) = %q, want %q", dev, got, want)
	}
	if rdevOther, err := DeviceNumber(other); err != nil {
		t.Fatal(err)
	} else if got, err := MountsOf(rdevOther); err != nil || len(got) != 0 {
		t.Errorf("MountsOf(unmounted %s) = %q, %v", other, got, err)
	}
}

// TestMountInfoUnescapes: mountinfo writes a space, tab, newline or
// backslash in a path or source as an octal escape (\040); the mounts are
// found at their real paths, with their real root and source. A tmpfs
// with such names, and a bind of a directory of it.
func TestMountInfoUnescapes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to mount")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	point := filepath.Join(dir, "a vol\twith\\odd\nname")
	bound := filepath.Join(dir, "bound here")
	for _, p := range []string{point, bound} {
		if err := os.Mkdir(p, 0o750); err != nil {
			t.Fatal(err)
		}
		cleanupMounts(t, p)
	}
	const source = `carve test\src`
	if err := unix.Mount(source, point, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(point, "sub dir")
	if err := os.Mkdir(sub, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(sub, bound, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(point, &st); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		find func() (Mount, error)
		want Mount
	}{
		{"mountOf(point)", func() (Mount, error) { return mountOf(point) }, Mount{Point: point, Root: "/"}},
		{"Holder(sub)", func() (Mount, error) { return Holder(sub) }, Mount{Point: point, Root: "/"}},
		{"mountOf(bound)", func() (Mount, error) { return mountOf(bound) }, Mount{Point: bound, Root: "/sub dir"}},
	} {
		got, err := tc.find()
		tc.want.Source, tc.want.FsType = source, "tmpfs"
		tc.want.Major, tc.want.Minor = int(unix.Major(st.Dev)), int(unix.Minor(st.Dev))
		if err != nil || got != tc.want {
			t.Errorf("%s = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// TestFormatAndMountProbesOnce: a stage runs one blkid, the one
// FormatAndMount decides on, blank device or formatted; formatted says
// which it was. Carve's own check used to run a blkid of its own before
// it: one process more for every NodeStage (docs/performance.md).
func TestFormatAndMountProbesOnce(t *testing.T) {
	for _, fsType := range []string{"ext4", "xfs"} {
		dev, _ := newLoop(t, minSize["xfs"])
		rec := newRecordingExec()
		m := New(rec)
		target := filepath.Join(t.TempDir(), "staging")
		cleanupMounts(t, target)
		formatted, err := m.FormatAndMount(ctxT(t), dev, target, fsType, MkfsOptions{}, nil)
		if err != nil || !formatted {
			t.Fatalf("%s, blank device: formatted = %t, %v; want a format", fsType, formatted, err)
		}
		if n := rec.count("blkid"); n != 1 {
			t.Errorf("%s, blank device: %d blkid runs, want 1", fsType, n)
		}
		if err := m.Unmount(target); err != nil {
			t.Fatal(err)
		}
		rec = newRecordingExec()
		m = New(rec)
		formatted, err = m.FormatAndMount(ctxT(t), dev, target, fsType, MkfsOptions{}, nil)
		if err != nil || formatted {
			t.Fatalf("%s, formatted device: formatted = %t, %v; want it mounted as it is", fsType, formatted, err)
		}
		if n, mk := rec.count("blkid"), rec.count("mkfs."); n != 1 || mk != 0 {
			t.Errorf("%s, formatted device: %d blkid and %d mkfs runs, want 1 and 0", fsType, n, mk)
		}
	}
}
