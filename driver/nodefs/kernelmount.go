package nodefs

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

// kernelMounter mounts and unmounts with the mount(2) and umount2(2)
// system calls instead of running mount(8) and umount(8) as mount-utils
// does; the rest of mount.Interface (IsMountPoint, the mount list) is
// mount-utils'.
//
// Why: a staged and published volume took four processes for its mounts
// and unmounts (mount, the bind's mount, two umounts), and a process
// costs more than the kernel's work for a local filesystem: 0.1-0.2 s in
// the emulated VM, milliseconds on real hardware (docs/performance.md).
// What mount(8) adds for a local filesystem on a block device is not
// needed here: the options are Carve's allowlist (options.go), whose
// per-mount words map to MS_ flags as libmount maps them and whose other
// words are the filesystem's own, passed to it as mount(2)'s data; the
// device and the target are paths Carve resolved; and /etc/mtab is the
// kernel's list. Helpers (mount.nfs and the like) and user mounts, the
// rest of mount(8), are for filesystems Carve does not mount. nodefs
// mounts through Mount alone; the embedded variants (MountSensitive...)
// are mount-utils' and go unused.
type kernelMounter struct{ mount.Interface }

// vfsFlagBits: how each per-mount word sets (or, with clear, clears) its
// MS_ flag, as libmount reads them.
var vfsFlagBits = map[string]struct {
	bit   uintptr
	clear bool
}{
	"ro": {unix.MS_RDONLY, false}, "rw": {unix.MS_RDONLY, true},
	"sync": {unix.MS_SYNCHRONOUS, false}, "async": {unix.MS_SYNCHRONOUS, true},
	"dirsync": {unix.MS_DIRSYNC, false},
	"noatime": {unix.MS_NOATIME, false}, "atime": {unix.MS_NOATIME, true},
	"nodiratime": {unix.MS_NODIRATIME, false}, "diratime": {unix.MS_NODIRATIME, true},
	"relatime": {unix.MS_RELATIME, false}, "norelatime": {unix.MS_RELATIME, true},
	"strictatime": {unix.MS_STRICTATIME, false}, "nostrictatime": {unix.MS_STRICTATIME, true},
	"lazytime": {unix.MS_LAZYTIME, false}, "nolazytime": {unix.MS_LAZYTIME, true},
	"nosuid": {unix.MS_NOSUID, false}, "suid": {unix.MS_NOSUID, true},
	"nodev": {unix.MS_NODEV, false}, "dev": {unix.MS_NODEV, true},
	"noexec": {unix.MS_NOEXEC, false}, "exec": {unix.MS_NOEXEC, true},
	"iversion": {unix.MS_I_VERSION, false}, "noiversion": {unix.MS_I_VERSION, true},
	"mand": {unix.MS_MANDLOCK, false}, "nomand": {unix.MS_MANDLOCK, true},
	"silent": {unix.MS_SILENT, false}, "loud": {unix.MS_SILENT, true},
	"bind": {unix.MS_BIND, false},
}

// splitOptions turns mount options into mount(2)'s flags and data: each
// per-mount word sets or clears its flag, in order (the last word wins, as
// with mount(8)), "defaults" is none, and every other word is the
// filesystem's, joined with commas into data. A bind mount has no data:
// the filesystem's words (a class's mountOptions, which kubelet passes
// to NodePublishVolume too) are the staged filesystem's, and the kernel
// ignores them on a bind remount, as it did when mount(8) passed them.
func splitOptions(options []string, bind bool) (flags uintptr, data string) {
	var fsOpts []string
	for _, o := range options {
		f, isVFS := vfsFlagBits[o]
		switch {
		case o == "defaults":
		case isVFS && f.clear:
			flags &^= f.bit
		case isVFS:
			flags |= f.bit
		default:
			fsOpts = append(fsOpts, o)
		}
	}
	if bind {
		return flags, ""
	}
	return flags, strings.Join(fsOpts, ",")
}

// Mount mounts source at target: a filesystem of fstype ("" is no
// filesystem: options must then hold "bind"), or a bind mount, remounted
// with the other flags when there are any, since a bind mount ignores
// them (mount(8) does the same two calls).
func (k kernelMounter) Mount(source, target, fstype string, options []string) error {
	bind := slices.Contains(options, "bind")
	flags, data := splitOptions(options, bind)
	if !bind {
		if err := unix.Mount(source, target, fstype, flags, data); err != nil {
			return fmt.Errorf("mount(2) %s at %s as %s, flags %#x, options %q: %w", source, target, fstype, flags, data, err)
		}
		return nil
	}
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("mount(2) bind %s at %s: %w", source, target, err)
	}
	if rest := flags &^ unix.MS_BIND; rest != 0 {
		if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|rest, ""); err != nil {
			return fmt.Errorf("mount(2) remount bind %s at %s, flags %#x: %w", source, target, rest, err)
		}
	}
	return nil
}

// Unmount unmounts the mount at target (the topmost, as umount(8) does).
func (k kernelMounter) Unmount(target string) error {
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("umount2(2) %s: %w", target, err)
	}
	return nil
}
