package nodefs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/volume"
)

func TestCheckMountFlags(t *testing.T) {
	for _, tc := range []struct {
		fsType string
		flags  []string
	}{
		{"", nil},
		{"ext4", []string{"noatime", "nodiratime", "errors=remount-ro", "data=ordered", "commit=30", "discard"}},
		{"xfs", []string{"nouuid", "logbsize=256k", "inode64", "ro"}},
		{"btrfs", []string{"compress=zstd:3", "compress-force", "ssd", "space_cache=v2"}},
		{"", []string{"barrier=0", "lazytime"}}, // ext4 by default
		// SELinux labels as kubelet passes them (seLinuxMount: true).
		{"ext4", []string{`context="system_u:object_r:container_file_t:s0:c1,c2"`}},
		{"xfs", []string{"context=system_u:object_r:container_file_t:s0", "noatime"}},
		{"ext4", []string{`context="system_u:object_r:container_t:s0-s0:c0.c1023"`}},
		{"btrfs", []string{"fscontext=system_u:object_r:fs_t", `defcontext="u:r:t:s0:c5"`, "rootcontext=u:r:t"}},
	} {
		if err := CheckMountFlags(tc.fsType, tc.flags); err != nil {
			t.Errorf("CheckMountFlags(%q, %q) = %v", tc.fsType, tc.flags, err)
		}
	}
	for _, tc := range []struct {
		fsType, flag string
	}{
		{"ext4", "bind"}, {"ext4", "rbind"}, {"ext4", "remount"}, {"ext4", "remount,ro"}, {"ext4", "move"},
		{"ext4", "make-shared"}, {"ext4", "X-mount.mkdir"}, {"ext4", "loop"}, {"ext4", "offset=0"},
		{"ext4", "noatime;reboot"}, {"ext4", "$(id)"}, {"ext4", "`id`"}, {"ext4", "a b"}, {"ext4", "noatime\n"},
		{"ext4", ""}, {"ext4", "="}, {"ext4", "errors="}, {"ext4", "data=a,b"}, {"ext4", `errors="x"`},
		{"ext4", "journal_dev=8"}, {"ext4", "journal_path=/dev/sda"}, {"ext4", "abort"},
		{"ext4", "nouuid"}, // xfs's
		{"xfs", "logdev=/dev/sda"}, {"xfs", "rtdev=/dev/sda"}, {"xfs", "errors=continue"},
		{"btrfs", "subvol=/x"}, {"btrfs", "subvolid=5"}, {"btrfs", "device=/dev/sda"},
		{"ext4", "noatime=1"}, // a bare flag given a value
		{"ext4", "commit"},    // a valued one given none
		// SELinux labels: commas only inside quotes, quotes only around
		// the whole label, nothing but a label inside.
		{"ext4", "context=system_u:object_r:container_file_t:s0:c1,c2"},
		{"ext4", `context="system_u:object_r:container_file_t:s0",bind`},
		{"ext4", `context="system_u:object_r:container_file_t:s0:c1,bind"`},
		{"ext4", `context="system_u:object_r:container_file_t:s0`},
		{"ext4", `context="`}, {"ext4", `context=""`}, {"ext4", "context="}, {"ext4", "context"},
		{"ext4", `context="a:b"`}, {"ext4", "context='u:r:t'"}, {"ext4", "context=u:r:t/../x"},
		{"ext4", `context=u:r:"t"`}, {"ext4", "context=u:r:t:s0:c1 c2"}, {"ext4", "context=u:r:t:x0"},
		{"ext4", "selinux=u:r:t"},
	} {
		if err := CheckMountFlags(tc.fsType, []string{"noatime", tc.flag}); !errors.Is(err, volume.ErrBadMountFlag) {
			t.Errorf("CheckMountFlags(%q, %q) = %v, want volume.ErrBadMountFlag", tc.fsType, tc.flag, err)
		}
	}
}

// TestPrepareTargetRefusesContent: an existing path is used only when it is
// empty (or already a mount); nothing in it is touched.
func TestPrepareTargetRefusesContent(t *testing.T) {
	m := New(nil)
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	file := filepath.Join(dir, "file")
	link := filepath.Join(dir, "link")
	must(t, os.Mkdir(full, 0o750))
	writeFile(t, filepath.Join(full, "keep"), "x")
	writeFile(t, file, "content")
	must(t, os.Symlink(full, link))
	for _, tc := range []struct {
		path string
		dir  bool
	}{{full, true}, {file, false}, {file, true}, {link, true}, {full, false}} {
		if err := m.PrepareTarget(tc.path, tc.dir); !errors.Is(err, volume.ErrUnsafeTarget) {
			t.Errorf("PrepareTarget(%s, dir=%t) = %v, want volume.ErrUnsafeTarget", tc.path, tc.dir, err)
		}
	}
	if readFile(t, file) != "content" || readFile(t, filepath.Join(full, "keep")) != "x" {
		t.Fatal("refused targets changed")
	}
	empty, emptyFile := filepath.Join(dir, "empty"), filepath.Join(dir, "emptyfile")
	must(t, os.Mkdir(empty, 0o750))
	writeFile(t, emptyFile, "")
	for _, tc := range []struct {
		path string
		dir  bool
	}{{empty, true}, {emptyFile, false}, {filepath.Join(dir, "new"), true}, {filepath.Join(dir, "newfile"), false}} {
		if err := m.PrepareTarget(tc.path, tc.dir); err != nil {
			t.Errorf("PrepareTarget(%s, dir=%t) = %v", tc.path, tc.dir, err)
		}
	}
}

// TestUnmountRemovesOnlyWhatCarveMakes: a path that is no mount is removed
// only when it is an empty directory or an empty file.
func TestUnmountRemovesOnlyWhatCarveMakes(t *testing.T) {
	m := New(nil)
	dir := t.TempDir()
	full, file := filepath.Join(dir, "full"), filepath.Join(dir, "file")
	must(t, os.Mkdir(full, 0o750))
	writeFile(t, filepath.Join(full, "keep"), "x")
	writeFile(t, file, "content")
	for _, p := range []string{full, file} {
		if err := m.Unmount(p); !errors.Is(err, volume.ErrUnsafeTarget) {
			t.Errorf("Unmount(%s) = %v, want volume.ErrUnsafeTarget", p, err)
		}
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	empty, emptyFile := filepath.Join(dir, "empty"), filepath.Join(dir, "emptyfile")
	must(t, os.Mkdir(empty, 0o750))
	writeFile(t, emptyFile, "")
	for _, p := range []string{empty, emptyFile} {
		if err := m.Unmount(p); err != nil {
			t.Errorf("Unmount(%s) = %v", p, err)
		}
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not removed: %v", p, err)
		}
	}
}

// TestMountOwnership tells a volume's mounts from another device's, on
// real loop devices: a staging mount and its bind are the device's
// filesystem, a bound device node is the device, the holder of a path
// inside a mount is that mount.
func TestMountOwnership(t *testing.T) {
	devA, _ := newLoop(t, 64*mib)
	devB, _ := newLoop(t, 64*mib)
	m := New(nil)
	stagingA, stagingB := stage(t, m, devA, "ext4"), stage(t, m, devB, "ext4")
	rdevA, err := DeviceNumber(devA)
	must(t, err)
	pub := filepath.Join(t.TempDir(), "pub")
	cleanupMounts(t, pub)
	must(t, m.BindMount(stagingA, pub, false, nil))
	node := filepath.Join(t.TempDir(), "node")
	cleanupMounts(t, node)
	must(t, m.BindMount(devA, node, false, nil))
	sub := filepath.Join(stagingA, "sub")
	must(t, os.Mkdir(sub, 0o750))

	for path, want := range map[string]bool{stagingA: true, pub: true, stagingB: false, node: false, sub: false, t.TempDir(): false} {
		if got, err := FilesystemOf(path, rdevA); err != nil || got != want {
			t.Errorf("FilesystemOf(%s) = %t, %v; want %t", path, got, err, want)
		}
	}
	for path, want := range map[string]bool{node: true, stagingA: false, pub: false} {
		if got, err := DeviceNodeOf(path, rdevA); err != nil || got != want {
			t.Errorf("DeviceNodeOf(%s) = %t, %v; want %t", path, got, err, want)
		}
	}
	h, err := Holder(sub)
	if err != nil || h.Point != stagingA || !h.OfDevice(rdevA) {
		t.Errorf("Holder(%s) = %+v, %v; want the mount at %s", sub, h, err, stagingA)
	}
}

// TestMkfsRefusalIsCannotFormat: a device mkfs refuses (too small for xfs)
// is volume.ErrCannotFormat, and nothing is mounted.
func TestMkfsRefusalIsCannotFormat(t *testing.T) {
	dev, _ := newLoop(t, 64*mib)
	m := New(nil)
	target := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, target)
	if _, err := m.FormatAndMount(ctxT(t), dev, target, "xfs", MkfsOptions{}, nil); !errors.Is(err, volume.ErrCannotFormat) {
		t.Fatalf("xfs on 64 MiB: err = %v, want volume.ErrCannotFormat", err)
	}
	if ok, _ := m.IsMountPoint(target); ok {
		t.Fatal("mounted after a refused format")
	}
}

// TestDamagedFilesystemIsNotMounted: an ext4 whose check finds what
// fsck -a will not repair (its root inode cleared, the filesystem marked
// not clean) is volume.ErrFilesystemDamaged (FAILED_PRECONDITION), naming
// the repair; nothing is mounted and nothing is formatted.
func TestDamagedFilesystemIsNotMounted(t *testing.T) {
	dev, _ := newLoop(t, 64*mib)
	mkfs(t, "ext4", dev)
	run(t, "debugfs", "-w", "-R", "clri <2>", dev)
	run(t, "debugfs", "-w", "-R", "ssv state 0", dev)
	m := New(nil)
	target := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, target)
	_, err := m.FormatAndMount(ctxT(t), dev, target, "ext4", MkfsOptions{}, nil)
	if !errors.Is(err, volume.ErrFilesystemDamaged) || volume.CodeOf(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "e2fsck -f") {
		t.Fatalf("a damaged ext4: err = %v (%v), want volume.ErrFilesystemDamaged naming the repair", err, volume.CodeOf(err))
	}
	if ok, _ := m.IsMountPoint(target); ok {
		t.Fatal("a damaged filesystem was mounted")
	}
	if fs, err := m.FilesystemType(ctxT(t), dev); err != nil || fs != "ext4" {
		t.Fatalf("the device holds %q (%v) after the refusal, want its ext4 untouched", fs, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
