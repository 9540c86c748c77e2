package nodefs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"carve.dev/carve/lvm/runner"
)

// Filesystem work is data work: mkfs, fsck and resize2fs slower than the
// per-command timeout (--command-timeout, meant for quick commands such as
// lvm's and blkid) must still run to completion. Slow wrappers around the
// real tools stand for a large volume on a slow device.

// slowCmdTimeout is the metadata commands' timeout here: blkid must fit in
// it on a loaded machine (500 ms did not, once, with a load of 11 on two
// cores), and the slow wrappers take three times as long.
const slowCmdTimeout = 2 * time.Second

// slowWrap puts wrappers named tools first in PATH for this test: each
// sleeps for delay, runs the real tool with its arguments, then appends the
// tool's name to the returned file (so a run cut short leaves no line).
func slowWrap(t *testing.T, delay time.Duration, tools ...string) (completed string) {
	t.Helper()
	dir := t.TempDir()
	completed = filepath.Join(dir, "completed")
	for _, tool := range tools {
		real, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("skipping: %s not installed", tool)
		}
		script := fmt.Sprintf("#!/bin/sh\nsleep %g\n%s \"$@\"\nrc=$?\necho %s >>%s\nexit $rc\n",
			delay.Seconds(), real, tool, completed)
		if err := os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return completed
}

// wantCompleted fails unless the wrapped tools ran to their end, in order.
func wantCompleted(t *testing.T, completed string, tools ...string) {
	t.Helper()
	b, _ := os.ReadFile(completed)
	if got, want := strings.Fields(string(b)), tools; !slices.Equal(got, want) {
		t.Errorf("tools that ran to completion: %v, want %v", got, want)
	}
}

func TestFormatAndFsckOutliveCommandTimeout(t *testing.T) {
	dev, _ := newLoop(t, minSize["ext4"])
	completed := slowWrap(t, 3*slowCmdTimeout, "mkfs.ext4", "fsck")
	m := New(runner.New(slowCmdTimeout).AsExecInterface())
	target := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, target)
	start := time.Now()
	if _, err := m.FormatAndMount(ctxT(t), dev, target, "ext4", MkfsOptions{}, nil); err != nil {
		t.Fatalf("FormatAndMount with an mkfs slower than the command timeout: %v", err)
	}
	if took := time.Since(start); took < slowCmdTimeout {
		t.Fatalf("took %v, less than the command timeout: the slow mkfs did not run", took)
	}
	if err := m.Unmount(target); err != nil {
		t.Fatal(err)
	}
	// Mounting an existing filesystem runs fsck first. mount-utils mounts
	// even when fsck fails, so only the record shows that it was not cut.
	if _, err := m.FormatAndMount(ctxT(t), dev, target, "ext4", MkfsOptions{}, nil); err != nil {
		t.Fatalf("FormatAndMount with an fsck slower than the command timeout: %v", err)
	}
	assertMountOf(t, m, target, dev)
	wantCompleted(t, completed, "mkfs.ext4", "fsck")
}

// xfs, since ext4's online resize needs CAP_SYS_RESOURCE, which a test
// process may lack; both tools take the same path (data work, exec.go).
func TestResizeOutlivesCommandTimeout(t *testing.T) {
	small := minSize["xfs"]
	dev, file := newLoop(t, small)
	target := stage(t, New(nil), dev, "xfs")
	growLoop(t, dev, file, small+128*mib)
	completed := slowWrap(t, 3*slowCmdTimeout, "xfs_growfs")
	m := New(runner.New(slowCmdTimeout).AsExecInterface())
	if err := m.ResizeFS(ctxT(t), dev, target); err != nil {
		t.Fatalf("ResizeFS with an xfs_growfs slower than the command timeout: %v", err)
	}
	wantCompleted(t, completed, "xfs_growfs")
	st, err := PathStats(target)
	if err != nil {
		t.Fatal(err)
	}
	if st.TotalBytes < small+64*mib {
		t.Errorf("filesystem is %d bytes after ResizeFS, want it grown towards %d", st.TotalBytes, small+128*mib)
	}
}
