package nodefs

// mkfs options on real loop devices: what the filesystem's own tools show
// after FormatAndMount formatted a blank device with them, and that a
// device with a filesystem keeps it as it is.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"

	"carve.dev/carve/driver/volume"
)

func mustParse(t *testing.T, fsType, s string) MkfsOptions {
	t.Helper()
	o, err := ParseMkfsOptions(fsType, s)
	must(t, err)
	return o
}

// field reads the first number after pattern's match in out (a tool's
// report), failing the test when there is none.
func field(t *testing.T, out, pattern string) int64 {
	t.Helper()
	m := regexp.MustCompile(pattern + `\s*(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q in:\n%s", pattern, out)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	must(t, err)
	return n
}

// formatWith formats a new blank loop device of size bytes as fsType with
// opts through FormatAndMount, and returns the device and its mount.
func formatWith(t *testing.T, fsType string, size int64, opts string) (dev, target string) {
	t.Helper()
	dev, _ = newLoop(t, size)
	target = filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, target)
	formatted, err := New(nil).FormatAndMount(ctxT(t), dev, target, fsType, mustParse(t, fsType, opts), nil)
	if err != nil || !formatted {
		t.Fatalf("FormatAndMount as %s with %q: formatted %t, %v", fsType, opts, formatted, err)
	}
	return dev, target
}

func TestMkfsOptionsExt4(t *testing.T) {
	dev, target := formatWith(t, "ext4", 64*mib, "-N 20000 -b 2048 -I 512 -m 5 -O ^has_journal -E lazy_itable_init=0,root_owner=1000:2000")
	sb := run(t, "dumpe2fs", "-h", dev)
	if n := field(t, sb, `Inode count:`); n < 20000 || n > 30000 {
		t.Errorf("inode count %d, want about the 20000 asked (rounded up to whole groups)", n)
	}
	if n := field(t, sb, `Block size:`); n != 2048 {
		t.Errorf("block size %d, want 2048", n)
	}
	if n := field(t, sb, `Inode size:`); n != 512 {
		t.Errorf("inode size %d, want 512", n)
	}
	blocks, reserved := field(t, sb, `Block count:`), field(t, sb, `Reserved block count:`)
	if reserved < blocks*4/100 || reserved > blocks*6/100 {
		t.Errorf("%d of %d blocks reserved, want 5%%", reserved, blocks)
	}
	if regexp.MustCompile(`features:.*has_journal`).MatchString(sb) {
		t.Errorf("has_journal still set:\n%s", sb)
	}
	fi, err := os.Stat(target)
	must(t, err)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 2000 {
		t.Errorf("root directory owned by %d:%d, want 1000:2000", st.Uid, st.Gid)
	}

	// Without options: mkfs's defaults and no blocks reserved, as before.
	dev2, _ := formatWith(t, "ext4", 64*mib, "")
	sb2 := run(t, "dumpe2fs", "-h", dev2)
	if field(t, sb2, `Reserved block count:`) != 0 || field(t, sb2, `Block size:`) == 2048 {
		t.Errorf("default ext4 has reserved blocks or the class's block size:\n%s", sb2)
	}
}

func TestMkfsOptionsXFS(t *testing.T) {
	_, target := formatWith(t, "xfs", minSize["xfs"], "-i size=1024 -m reflink=0 -b size=2048")
	info := run(t, "xfs_info", target)
	if n := field(t, info, `isize=`); n != 1024 {
		t.Errorf("isize %d, want 1024:\n%s", n, info)
	}
	if n := field(t, info, `reflink=`); n != 0 {
		t.Errorf("reflink=%d, want 0:\n%s", n, info)
	}
	if n := field(t, info, `data\s+=\s+bsize=`); n != 2048 {
		t.Errorf("data bsize %d, want 2048:\n%s", n, info)
	}
}

func TestMkfsOptionsBtrfs(t *testing.T) {
	if _, err := exec.LookPath("mkfs.btrfs"); err != nil {
		t.Skip("skipping: mkfs.btrfs not installed")
	}
	dev, _ := formatWith(t, "btrfs", 256*mib, "-n 32768")
	if n := field(t, run(t, "btrfs", "inspect-internal", "dump-super", dev), `nodesize`); n != 32768 {
		t.Errorf("nodesize %d, want 32768", n)
	}
}

// TestMkfsOptionsNeverOnAFilesystem: a device that holds a filesystem is
// mounted as it is, whatever the class's options say; options vetted for
// another filesystem are refused before anything runs.
func TestMkfsOptionsNeverOnAFilesystem(t *testing.T) {
	dev, _ := newLoop(t, 64*mib)
	mkfs(t, "ext4", dev)
	before := field(t, run(t, "dumpe2fs", "-h", dev), `Inode count:`)
	rec := newRecordingExec()
	m := New(rec)
	target := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, target)
	formatted, err := m.FormatAndMount(ctxT(t), dev, target, "ext4", mustParse(t, "ext4", "-N 50000 -b 1024"), nil)
	if err != nil || formatted || rec.count("mkfs.") != 0 {
		t.Fatalf("formatted %t, %v, %d mkfs runs; want the filesystem mounted as it is", formatted, err, rec.count("mkfs."))
	}
	if after := field(t, run(t, "dumpe2fs", "-h", dev), `Inode count:`); after != before {
		t.Errorf("inode count %d, was %d", after, before)
	}

	blank, _ := newLoop(t, minSize["xfs"])
	rec = newRecordingExec()
	other := filepath.Join(t.TempDir(), "other")
	_, err = New(rec).FormatAndMount(context.Background(), blank, other, "xfs", mustParse(t, "ext4", "-N 1000"), nil)
	if !errors.Is(err, volume.ErrInvalidArgument) || len(rec.cmds) != 0 {
		t.Errorf("ext4 options for xfs: %v after %v, want INVALID_ARGUMENT before any command", err, rec.cmds)
	}
}

// TestMkfsRefusedCombination: vetted options the tool refuses together
// are volume.ErrCannotFormat, and the device stays blank, for the next
// stage (with a corrected class) to format.
func TestMkfsRefusedCombination(t *testing.T) {
	for _, tc := range []struct{ fsType, opts string }{
		{"ext4", "-b 1024 -I 2048"},     // an inode larger than a block
		{"xfs", "-i size=256 -m crc=1"}, // crc=1 needs 512-byte inodes
	} {
		dev, _ := newLoop(t, minSize["xfs"])
		m := New(nil)
		target := filepath.Join(t.TempDir(), "staging")
		cleanupMounts(t, target)
		_, err := m.FormatAndMount(ctxT(t), dev, target, tc.fsType, mustParse(t, tc.fsType, tc.opts), nil)
		if !errors.Is(err, volume.ErrCannotFormat) {
			t.Errorf("%s %q: %v, want volume.ErrCannotFormat", tc.fsType, tc.opts, err)
		}
		if got, err := m.FilesystemType(ctxT(t), dev); err != nil || got != "" {
			t.Errorf("%s %q: the device holds %q (%v) after the refusal, want it blank", tc.fsType, tc.opts, got, err)
		}
	}
}
