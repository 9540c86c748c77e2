package nodefs

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	mount "k8s.io/mount-utils"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm/runner"
)

// TestMountUtilsContract holds the one mount-utils function FormatAndMount
// decides on, GetDiskFormat, to what Carve relies on, on real devices with
// the real blkid through Carve's runner: "" for a blank device and only
// for one; the filesystem's name for each filesystem Carve makes; something
// else, not "", for any other signature (swap, a partition table); one
// command, run through the exec it was given. A mount-utils release that
// reads blkid otherwise, or runs it some other way, fails here rather than
// formatting a device that holds something, or bypassing the runner.
// FormatAndMount then does what it found on the same devices: mkfs only on
// the blank one.
func TestMountUtilsContract(t *testing.T) {
	type device struct {
		name   string
		make   func(dev string)
		want   string // GetDiskFormat's answer; "*" any that is not ""
		fsType string // what FormatAndMount is asked for
	}
	devices := []device{
		{"blank", func(string) {}, "", "ext4"},
		{"ext4", func(dev string) { mkfs(t, "ext4", dev) }, "ext4", "ext4"},
		{"xfs", func(dev string) { mkfs(t, "xfs", dev) }, "xfs", "xfs"},
		{"swap", func(dev string) { run(t, "mkswap", dev) }, "swap", "ext4"},
		{"dos partition table", func(dev string) { writeMBR(t, dev) }, "*", "ext4"},
		{"xfs asked as ext4", func(dev string) { mkfs(t, "xfs", dev) }, "xfs", "ext4"},
	}
	if _, err := exec.LookPath("mkfs.btrfs"); err == nil {
		devices = append(devices, device{"btrfs", func(dev string) { run(t, "mkfs.btrfs", "-q", dev) }, "btrfs", "btrfs"})
	}
	for _, d := range devices {
		t.Run(d.name, func(t *testing.T) {
			dev, _ := newLoop(t, minSize["xfs"])
			d.make(dev)
			rec := &recordingExec{Interface: runner.New(time.Minute).AsExecInterface()}
			got, err := (&mount.SafeFormatAndMount{Exec: rec}).GetDiskFormat(dev)
			if err != nil || (d.want == "*" && got == "") || (d.want != "*" && got != d.want) {
				t.Fatalf("GetDiskFormat = %q, %v; want %q", got, err, d.want)
			}
			if len(rec.cmds) != 1 || rec.cmds[0] != "blkid" {
				t.Fatalf("GetDiskFormat ran %v through its exec, want one blkid", rec.cmds)
			}

			rec = &recordingExec{Interface: runner.New(time.Minute).AsExecInterface()}
			m := New(rec)
			target := filepath.Join(t.TempDir(), "staging")
			cleanupMounts(t, target)
			formatted, err := m.FormatAndMount(ctxT(t), dev, target, d.fsType, MkfsOptions{}, nil)
			switch {
			case got == "" && (err != nil || !formatted || rec.count("mkfs.") != 1):
				t.Fatalf("blank device: formatted = %t, %v, %d mkfs runs; want one format", formatted, err, rec.count("mkfs."))
			case got == d.fsType && (err != nil || formatted || rec.count("mkfs.") != 0):
				t.Fatalf("%s device: formatted = %t, %v, %d mkfs runs; want it mounted as it is", got, formatted, err, rec.count("mkfs."))
			case got != "" && got != d.fsType && (!errors.Is(err, volume.ErrFilesystemMismatch) || rec.count("mkfs.") != 0):
				t.Fatalf("%q asked as %s: %v, %d mkfs runs; want volume.ErrFilesystemMismatch and no mkfs", got, d.fsType, err, rec.count("mkfs."))
			}
			if err == nil {
				assertMountOf(t, m, target, dev)
			}
		})
	}
}
