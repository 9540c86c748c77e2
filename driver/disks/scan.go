package disks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// sectorSize is the unit of sysfs's size file, whatever the device's own
// sector size.
const sectorSize = 512

// Disk is a whole block device as sysfs tells it.
type Disk struct {
	// Name is the kernel's name (sdb, nvme0n1); Path its device node in
	// the scanned device directory (/dev/sdb).
	Name, Path string
	// Size in bytes.
	Size uint64
	// Model as the device reports it, trailing blanks trimmed; "" when
	// sysfs has none (virtio, loop).
	Model    string
	ReadOnly bool
	// Partitions are the kernel names of its partitions (sdb1).
	Partitions []string
	// Holders are the devices stacked on it (dm-3, md0).
	Holders []string
	// Links are the symlinks to it under /dev/disk/by-id, /dev/disk/by-path
	// and /dev/mapper, sorted.
	Links []string
	// Special marks a loop, RAM, optical, floppy, device-mapper, md or
	// nbd device: no glob, size or model selects it, only a path naming
	// it exactly (Match).
	Special bool
}

// specialPrefixes are the kernel names of devices that are not disks of
// their own: a glob written for disks ("/dev/*", or a size range) must
// not pick up a loop device's file, a RAM disk, a CD, or a device-mapper
// or md device built over other disks (a multipath device, named by its
// path, still can be).
var specialPrefixes = []string{"loop", "ram", "zram", "sr", "fd", "dm-", "md", "nbd"}

// linkDirs are the directories under the device directory whose symlinks
// name disks stably, as declarations do.
var linkDirs = []string{"disk/by-id", "disk/by-path", "mapper"}

// Scan lists the whole block devices under sysBlock (normally /sys/block)
// with their device nodes and links under devDir (normally /dev), sorted
// by name. A device that vanishes while it is read is left out; the next
// scan sees what is there then.
func Scan(sysBlock, devDir string) ([]Disk, error) {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	links, err := readLinks(devDir)
	if err != nil {
		return nil, err
	}
	var disks []Disk
	for _, e := range entries {
		d, err := readDisk(filepath.Join(sysBlock, e.Name()), e.Name(), devDir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("block device %s: %w", e.Name(), err)
		}
		d.Links = links[d.Path]
		disks = append(disks, d)
	}
	return disks, nil
}

// readDisk reads one device's directory in sysfs. Its size file is what
// makes it a block device: a directory without one is reported as gone.
func readDisk(dir, name, devDir string) (Disk, error) {
	d := Disk{
		Name: name,
		// sysfs writes a '/' of the device's name as '!' (cciss!c0d0 is
		// /dev/cciss/c0d0).
		Path:    filepath.Join(devDir, strings.ReplaceAll(name, "!", "/")),
		Special: slices.ContainsFunc(specialPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }),
	}
	sectors, err := readUint(filepath.Join(dir, "size"))
	if err != nil {
		return Disk{}, err
	}
	d.Size = sectors * sectorSize
	if ro, err := readTrimmed(filepath.Join(dir, "ro")); err == nil {
		d.ReadOnly = ro != "0"
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Disk{}, err
	}
	if d.Model, err = readTrimmed(filepath.Join(dir, "device", "model")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Disk{}, err
	}
	if d.Partitions, err = partitions(dir); err != nil {
		return Disk{}, err
	}
	if d.Holders, err = dirNames(filepath.Join(dir, "holders")); err != nil {
		return Disk{}, err
	}
	return d, nil
}

// partitions are the subdirectories of a device's sysfs directory that
// hold a partition file.
func partitions(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var parts []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "partition")); err == nil {
			parts = append(parts, e.Name())
		}
	}
	return parts, nil
}

// dirNames lists a directory's entries; none when it does not exist.
func dirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, nil
}

// readLinks maps each device node under devDir to the symlinks of linkDirs
// that point to it, sorted. A link is read, not followed: where it points
// is all that is asked, and udev writes them relative (../../sdb).
func readLinks(devDir string) (map[string][]string, error) {
	links := map[string][]string{}
	for _, sub := range linkDirs {
		dir := filepath.Join(devDir, sub)
		names, err := dirNames(dir)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", sub, err)
		}
		for _, n := range names {
			link := filepath.Join(dir, n)
			target, err := os.Readlink(link)
			if err != nil {
				continue // not a symlink, or gone since the listing
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(dir, target)
			}
			target = filepath.Clean(target)
			links[target] = append(links[target], link)
		}
	}
	for _, l := range links {
		slices.Sort(l)
	}
	return links, nil
}

func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

func readUint(path string) (uint64, error) {
	s, err := readTrimmed(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return n, nil
}
