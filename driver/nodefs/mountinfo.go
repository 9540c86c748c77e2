package nodefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Mount is one mount, as mountinfo records it.
type Mount struct {
	Point  string // where it is mounted (symlinks resolved)
	Root   string // what of its filesystem is mounted there: "/" for all
	Source string // what mount(8) was given, canonicalised
	FsType string
	Major  int // the filesystem's device number, as mountinfo has it
	Minor  int
}

func toMount(mi *mountinfo.Info) Mount {
	return Mount{Point: mi.Mountpoint, Root: mi.Root, Source: mi.Source, FsType: mi.FSType, Major: mi.Major, Minor: mi.Minor}
}

// mountOf returns the top-most mount at path (symlinks resolved); an error
// wrapping ErrNotMounted when path is no mount point.
func mountOf(path string) (Mount, error) {
	mi, err := mountAt(path)
	if err != nil {
		return Mount{}, err
	}
	return toMount(mi), nil
}

// OfDevice tells whether the mount shows the filesystem on the block
// device rdev, by the device number mountinfo records. btrfs records an
// anonymous number there, so its mounts are matched by the device node
// they were mounted from; for other filesystems the source is a free-form
// string, and never trusted.
func (mt Mount) OfDevice(rdev uint64) bool {
	if uint32(mt.Major) == unix.Major(rdev) && uint32(mt.Minor) == unix.Minor(rdev) {
		return true
	}
	n, err := deviceNumber(mt.Source)
	return mt.FsType == "btrfs" && err == nil && n == rdev
}

// Device is the block device the mount's filesystem lives on, by the same
// rules as OfDevice: mountinfo's number, or for btrfs its source's.
func (mt Mount) Device() uint64 {
	if mt.FsType == "btrfs" {
		if n, err := deviceNumber(mt.Source); err == nil {
			return n
		}
	}
	return unix.Mkdev(uint32(mt.Major), uint32(mt.Minor))
}

// FilesystemOf reports whether path is a mount of the whole filesystem on
// the block device rdev: a staging mount of it, or a bind of one (a
// publish). A path that is no mount point, or is missing, is false.
func FilesystemOf(path string, rdev uint64) (bool, error) {
	mt, err := mountOf(path)
	if errors.Is(err, ErrNotMounted) || errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return mt.Root == "/" && mt.OfDevice(rdev), nil
}

// DeviceNodeOf reports whether path is a mount point showing a node of the
// block device rdev: a raw block volume bound into place.
func DeviceNodeOf(path string, rdev uint64) (bool, error) {
	_, err := mountOf(path)
	if errors.Is(err, ErrNotMounted) || errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	n, err := deviceNumber(path)
	return err == nil && n == rdev, nil
}

// Holder returns the mount holding path, which must exist: the top-most
// mount at the longest mount point that is path or above it.
func Holder(path string) (Mount, error) {
	resolved, err := resolvePath(path)
	if err != nil {
		return Mount{}, err
	}
	infos, err := readMounts(atOrAbove(resolved))
	if err != nil {
		return Mount{}, err
	}
	holder, err := nearest(infos, resolved)
	if err != nil {
		return Mount{}, err
	}
	return toMount(holder), nil
}

// MountsOf lists the mount points that expose the block device rdev: the
// mounts of its filesystem (OfDevice's rules) and bind mounts of a node of
// the device itself, which show as devtmpfs mounts whose node may be
// named dm-N or mapper/vg-lv, so they are matched by the device number of
// the mounted file, not by name. Mount points are unescaped.
func MountsOf(rdev uint64) ([]string, error) {
	infos, err := readMounts(nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, mi := range infos {
		if toMount(mi).OfDevice(rdev) {
			out = append(out, mi.Mountpoint)
			continue
		}
		if n, err := deviceNumber(mi.Mountpoint); mi.FSType == "devtmpfs" && err == nil && n == rdev {
			out = append(out, mi.Mountpoint)
		}
	}
	return out, nil
}

// DeviceNumber returns the device number of the block device at path.
func DeviceNumber(path string) (uint64, error) { return deviceNumber(path) }

// mountAt returns the mountinfo entry of the top-most mount at path.
func mountAt(path string) (*mountinfo.Info, error) {
	resolved, err := resolvePath(path)
	if err != nil {
		return nil, err
	}
	infos, err := readMounts(at(resolved))
	if err != nil {
		return nil, err
	}
	return topOf(infos, resolved)
}

// readMounts reads this process's mount table, the entries filter keeps
// (nil: all), in its order. Every path in them comes unescaped: the
// kernel writes space, tab, newline and backslash as octal escapes (\040).
func readMounts(filter mountinfo.FilterFunc) ([]*mountinfo.Info, error) {
	infos, err := mountinfo.GetMounts(filter)
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return infos, nil
}

// at keeps the entries of the mounts at point. Not SingleEntryFilter:
// that stops at the first, the bottom of a stack.
func at(point string) mountinfo.FilterFunc {
	return func(mi *mountinfo.Info) (skip, stop bool) { return mi.Mountpoint != point, false }
}

// atOrAbove keeps the entries of the mounts at path or at a directory
// above it. Not ParentsFilter: that compares strings, and keeps /a for
// /ab.
func atOrAbove(path string) mountinfo.FilterFunc {
	return func(mi *mountinfo.Info) (skip, stop bool) {
		p := mi.Mountpoint
		return p != path && p != "/" && !strings.HasPrefix(path, p+"/"), false
	}
}

// nearest picks, of the mounts at path or above it (atOrAbove), the
// top-most at the longest mount point.
func nearest(infos []*mountinfo.Info, path string) (*mountinfo.Info, error) {
	var holder *mountinfo.Info
	for _, mi := range infos {
		if holder == nil || len(mi.Mountpoint) >= len(holder.Mountpoint) {
			holder = mi
		}
	}
	if holder == nil {
		return nil, fmt.Errorf("%s: %w", path, ErrNotMounted)
	}
	return holder, nil
}

// topOf picks the visible one of the mounts at point, which infos lists
// in mountinfo's order: when mounts are stacked, the last.
func topOf(infos []*mountinfo.Info, point string) (*mountinfo.Info, error) {
	if len(infos) == 0 {
		return nil, fmt.Errorf("%s: %w", point, ErrNotMounted)
	}
	return infos[len(infos)-1], nil
}

// resolvePath makes path absolute and symlink-free, as the kernel writes
// mount points into mountinfo.
func resolvePath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", path, err)
	}
	return resolved, nil
}

// deviceNumber returns the device number of the block device at path.
func deviceNumber(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0, fmt.Errorf("%s is not a block device", path)
	}
	return st.Rdev, nil
}
