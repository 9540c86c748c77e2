package nodefs

import (
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
)

// BindMount bind-mounts source onto target, read-only when asked, with
// options. A directory source gets a directory target; anything else (a
// block device node) gets a file target (PrepareTarget: a missing target
// is created, never its parent; an existing one must be empty).
//
// The mount is the bind then a "bind,remount,ro,..." remount, because a
// plain bind ignores options. If that remount fails, the bind it left
// behind is undone, so a retry never finds a writable mount where a
// read-only one was asked.
//
// For a device node, read-only is a property of the mount only: the kernel
// still lets anyone open the node for writing through it and write to the
// device. Keeping a raw block volume unwritable needs more than this.
//
// Idempotency: if target is already a mount point showing the same object
// as source (same inode, or same device number for device nodes) in the
// asked read-only mode, nil; otherwise an error wrapping volume.ErrMountConflict.
func (m *Mounter) BindMount(source, target string, readOnly bool, options []string) error {
	src, err := os.Stat(source)
	if err != nil {
		return fmt.Errorf("bind mount %s at %s: %w", source, target, err)
	}
	if err := m.PrepareTarget(target, src.IsDir()); err != nil {
		return fmt.Errorf("bind mount %s at %s: %w", source, target, err)
	}
	done, err := m.alreadyBound(source, src, target, readOnly)
	if err != nil || done {
		return err
	}
	opts := append([]string{"bind"}, options...)
	if readOnly {
		opts = append(opts, "ro")
	}
	if err := m.mounter.Mount(source, target, "", opts); err != nil {
		m.undoBind(target)
		return fmt.Errorf("bind mount %s at %s: %w", source, target, err)
	}
	klog.InfoS("bind mounted", "source", source, "target", target, "readOnly", readOnly, "options", options)
	return nil
}

// alreadyBound decides idempotency for BindMount; see there.
func (m *Mounter) alreadyBound(source string, src os.FileInfo, target string, readOnly bool) (bool, error) {
	mounted, err := m.IsMountPoint(target)
	if err != nil || !mounted {
		return false, err
	}
	tgt, err := os.Stat(target)
	if err != nil {
		return false, fmt.Errorf("bind mount %s at %s: %w", source, target, err)
	}
	if !sameObject(src, tgt) {
		return false, fmt.Errorf("%w: %s is already a mount of something other than %s", volume.ErrMountConflict, target, source)
	}
	ro, err := mountReadOnly(target)
	if err != nil {
		return false, err
	}
	if ro != readOnly {
		return false, fmt.Errorf("%w: %s is already bound from %s with read-only=%t, asked read-only=%t",
			volume.ErrMountConflict, target, source, ro, readOnly)
	}
	klog.V(2).InfoS("already bind mounted", "source", source, "target", target)
	return true, nil
}

// sameObject: the same inode, or two nodes of the same device.
func sameObject(a, b os.FileInfo) bool {
	if os.SameFile(a, b) {
		return true
	}
	sa, okA := a.Sys().(*unix.Stat_t)
	sb, okB := b.Sys().(*unix.Stat_t)
	isDev := a.Mode()&fs.ModeDevice != 0 && b.Mode()&fs.ModeDevice != 0
	return okA && okB && isDev && a.Mode().Type() == b.Mode().Type() && sa.Rdev == sb.Rdev
}

// mountReadOnly reports the read-only flag of the mount holding path;
// statfs reports per-mount flags, so this works for bind mounts too.
func mountReadOnly(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Flags&unix.ST_RDONLY != 0, nil
}

// undoBind removes a half-done bind mount after a failed Mount. Best
// effort: the Mount error is the one worth returning.
func (m *Mounter) undoBind(target string) {
	if mounted, err := m.IsMountPoint(target); err != nil || !mounted {
		return
	}
	if err := m.mounter.Unmount(target); err != nil {
		klog.ErrorS(err, "undo failed bind mount", "target", target)
		return
	}
	klog.InfoS("undid failed bind mount", "target", target)
}
