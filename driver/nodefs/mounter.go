// Package nodefs does the filesystem work of the CSI Node service on a block
// device it was handed: wait for it, format it (only when blank), mount it,
// bind-mount it, unmount it, measure it and grow its filesystem.
//
// It knows nothing of CSI; the Node service maps its errors to gRPC codes.
// Mounting, formatting, bind mounts, unmounting, mount-point checks,
// mountinfo parsing and filesystem growth are delegated to k8s.io/mount-utils.
//
// Callers serialise operations on the same target (the Node service holds a
// per-volume lock); nothing here locks.
package nodefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k8s.io/klog/v2"
	mount "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
)

var (
	// ErrMountConflict means the target is already a mount point, but not of what
	// was asked (another device, another directory, other read-only mode).
	ErrMountConflict = errors.New("mount conflict")
	// ErrFilesystemMismatch means the device already holds a filesystem (or a
	// partition table or other signature) that is not the one asked for.
	// Such a device is never reformatted.
	ErrFilesystemMismatch = errors.New("filesystem mismatch")
	// ErrNotMounted means the path is not a mount point.
	ErrNotMounted = errors.New("not mounted")
)

// Mounter does the node's filesystem work through k8s.io/mount-utils.
type Mounter struct {
	exec    utilexec.Interface
	mounter mount.Interface
}

// New builds a Mounter; exec runs blkid, mkfs, fsck and the resize tools
// (nil → utilexec.New()).
func New(exec utilexec.Interface) *Mounter {
	if exec == nil {
		exec = utilexec.New()
	}
	// Without systemd: systemd-run scopes only keep FUSE daemons alive across
	// restarts; ext4/xfs have none, and in a container probing systemd-run is
	// wasted work at best.
	return &Mounter{exec: exec, mounter: mount.NewWithoutSystemd("")}
}

// IsMountPoint reports whether path is a mount point, bind mounts of files
// and directories included (mountinfo-based, not the st_dev heuristic).
// A missing path is (false, error wrapping fs.ErrNotExist): callers decide
// whether "missing" means "nothing to do" or "create it".
func (m *Mounter) IsMountPoint(path string) (bool, error) {
	mounted, err := m.mounter.IsMountPoint(path)
	if err != nil {
		return false, fmt.Errorf("check mount point %s: %w", path, err)
	}
	return mounted, nil
}

// Unmount unmounts target if it is mounted, then removes it (file or empty
// directory). A missing target is nil, so repeating it is harmless.
//
// The target is removed with os.Remove, never RemoveAll: if the unmount did
// not really happen, a non-empty directory must make this fail rather than
// delete the volume's data through it.
func (m *Mounter) Unmount(target string) error {
	// Checked here, quietly: mount-utils warns on every missing path, and
	// retries of an unpublish make that the common case.
	if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
		klog.V(4).InfoS("unmount: target already gone", "target", target)
		return nil
	}
	// Only decides what to log; CleanupMountPoint does its own checks and
	// also copes with corrupted mounts that make this check fail.
	mounted, _ := m.IsMountPoint(target)
	if err := mount.CleanupMountPoint(target, m.mounter, true); err != nil {
		return fmt.Errorf("unmount %s: %w", target, err)
	}
	if mounted {
		klog.InfoS("unmounted", "target", target)
	}
	return nil
}
