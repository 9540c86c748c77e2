// Package nodefs does the filesystem work of the CSI Node service on a block
// device it was handed: wait for it, format it (only when blank), mount it,
// bind-mount it, unmount it, measure it and grow its filesystem. It also
// tells what a mount shows (the filesystem or the device node of which
// device; mountinfo.go), creates and removes only what it makes at a path
// (an empty directory or file; target.go), and checks mount flags against
// what a filesystem takes (options.go).
//
// It knows nothing of CSI; the Node service maps its errors to gRPC codes.
// Mount-point checks, reading blkid (GetDiskFormat) and filesystem growth
// are delegated to k8s.io/mount-utils; mounts and unmounts are system
// calls (kernelmount.go); the decision to format, mkfs and fsck are
// Carve's own (format.go); reading mountinfo (unescaped) to
// github.com/moby/sys/mountinfo.
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

	"carve.dev/carve/driver/volume"
)

// ErrNotMounted means the path is not a mount point.
var ErrNotMounted = errors.New("not mounted")

// Mounter does the node's filesystem work through k8s.io/mount-utils.
type Mounter struct {
	exec    utilexec.Interface
	mounter mount.Interface
}

// New builds a Mounter; exec runs blkid, mkfs, fsck and the resize tools
// (nil → utilexec.New(); carve gives lvm/runner's AsExecInterface).
func New(exec utilexec.Interface) *Mounter {
	if exec == nil {
		exec = utilexec.New()
	}
	// Without systemd: systemd-run scopes only keep FUSE daemons alive across
	// restarts; ext4/xfs have none, and in a container probing systemd-run is
	// wasted work at best.
	return &Mounter{exec: exec, mounter: kernelMounter{mount.NewWithoutSystemd("")}}
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

// Unmount unmounts target if it is a mount point, then removes what Carve
// made there: an empty directory or an empty file (removeTarget). A
// missing target is nil, so repeating it is harmless. Callers check first
// that a mount at target is the one they mean to undo.
//
// After the unmount, target must no longer be a mount point: when mounts
// are stacked on it, the one below is not Carve's to undo, and removing
// the path is refused along with it.
func (m *Mounter) Unmount(target string) error {
	// Checked here, quietly: retries of an unpublish make "already gone"
	// the common case.
	if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
		klog.V(4).InfoS("unmount: target already gone", "target", target)
		return nil
	}
	mounted, err := m.IsMountPoint(target)
	if err != nil {
		return err
	}
	if mounted {
		if err := m.mounter.Unmount(target); err != nil {
			return fmt.Errorf("unmount %s: %w", target, err)
		}
		still, err := m.IsMountPoint(target)
		if err != nil {
			return fmt.Errorf("%w: %s: after one unmount: %w", volume.ErrUnsafeTarget, target, err)
		}
		if still {
			return fmt.Errorf("%w: %s is still a mount point after one unmount (stacked mounts)", volume.ErrUnsafeTarget, target)
		}
		klog.InfoS("unmounted", "target", target)
	}
	return removeTarget(target)
}
