package nodefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

const mountInfoPath = "/proc/self/mountinfo"

// Mount is one mount, as mountinfo records it.
type Mount struct {
	Point  string // where it is mounted (symlinks resolved)
	Root   string // what of its filesystem is mounted there: "/" for all
	Source string // what mount(8) was given, canonicalised
	FsType string
	Major  int // the filesystem's device number, as mountinfo has it
	Minor  int
}

func toMount(mi mount.MountInfo) Mount {
	return Mount{Point: mi.MountPoint, Root: mi.Root, Source: mi.Source, FsType: mi.FsType, Major: mi.Major, Minor: mi.Minor}
}

// mountOf returns the top-most mount at path (symlinks resolved); an error
// wrapping ErrNotMounted when path is no mount point.
func mountOf(path string) (Mount, error) {
	mi, err := mountAt(path)
	return toMount(mi), err
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
	infos, err := mount.ParseMountInfo(mountInfoPath)
	if err != nil {
		return Mount{}, fmt.Errorf("read %s: %w", mountInfoPath, err)
	}
	best := ""
	for _, mi := range infos {
		p := unescapeMountInfo(mi.MountPoint)
		if (p == resolved || p == "/" || strings.HasPrefix(resolved, p+"/")) && len(p) >= len(best) {
			best = p
		}
	}
	mi, err := findMount(infos, best)
	return toMount(mi), err
}

// MountsOf lists the mount points that expose the block device rdev: the
// mounts of its filesystem (OfDevice's rules) and bind mounts of a node of
// the device itself, which show as devtmpfs mounts whose node may be
// named dm-N or mapper/vg-lv, so they are matched by the device number of
// the mounted file, not by name. Mount points are unescaped.
func MountsOf(rdev uint64) ([]string, error) {
	infos, err := mount.ParseMountInfo(mountInfoPath)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", mountInfoPath, err)
	}
	var out []string
	for _, mi := range infos {
		mi.MountPoint, mi.Source = unescapeMountInfo(mi.MountPoint), unescapeMountInfo(mi.Source)
		if toMount(mi).OfDevice(rdev) {
			out = append(out, mi.MountPoint)
			continue
		}
		if n, err := deviceNumber(mi.MountPoint); mi.FsType == "devtmpfs" && err == nil && n == rdev {
			out = append(out, mi.MountPoint)
		}
	}
	return out, nil
}

// DeviceNumber returns the device number of the block device at path.
func DeviceNumber(path string) (uint64, error) { return deviceNumber(path) }

// mountAt returns the mountinfo entry of the mount at path. When mounts are
// stacked on one point, the last entry is the visible one.
func mountAt(path string) (mount.MountInfo, error) {
	resolved, err := resolvePath(path)
	if err != nil {
		return mount.MountInfo{}, err
	}
	infos, err := mount.ParseMountInfo(mountInfoPath)
	if err != nil {
		return mount.MountInfo{}, fmt.Errorf("read %s: %w", mountInfoPath, err)
	}
	return findMount(infos, resolved)
}

// findMount picks the top-most mount at path from parsed mountinfo.
func findMount(infos []mount.MountInfo, path string) (mount.MountInfo, error) {
	var found *mount.MountInfo
	for i := range infos {
		if unescapeMountInfo(infos[i].MountPoint) == path {
			found = &infos[i]
		}
	}
	if found == nil {
		return mount.MountInfo{}, fmt.Errorf("%s: %w", path, ErrNotMounted)
	}
	mi := *found
	mi.MountPoint = path
	mi.Root = unescapeMountInfo(mi.Root)
	mi.Source = unescapeMountInfo(mi.Source)
	return mi, nil
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

// unescapeMountInfo undoes the kernel's octal escaping of space, tab,
// newline and backslash in mountinfo fields; mount-utils leaves it in.
func unescapeMountInfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
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
