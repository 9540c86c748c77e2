package nodefs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// devicePollInterval is how often WaitForDevice looks again: device nodes
// appear within milliseconds of lvcreate/lvchange, via udev, usually.
const devicePollInterval = 100 * time.Millisecond

// WaitForDevice polls until path exists and is a block device, or ctx ends,
// and returns the device's number. The error then says what was waited for
// and what the last look found.
func (m *Mounter) WaitForDevice(ctx context.Context, path string) (uint64, error) {
	ticker := time.NewTicker(devicePollInterval)
	defer ticker.Stop()
	for {
		rdev, last := deviceNumber(path)
		if last == nil {
			return rdev, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("wait for block device %s: %w; last check: %w", path, ctx.Err(), last)
		case <-ticker.C:
		}
	}
}

// CheckBlockDevice is nil when path (after symlinks) is a block device:
// a probe of anything else (a missing path, a plain file) says nothing of a
// disk.
func CheckBlockDevice(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	mode := fi.Mode()
	if mode&os.ModeDevice == 0 || mode&os.ModeCharDevice != 0 {
		return fmt.Errorf("%s is not a block device (mode %s)", path, mode)
	}
	return nil
}

// BlockSize returns the size in bytes of the block device at path, which may
// be a bind-mounted device file (it is the same inode, hence same device).
func BlockSize(path string) (int64, error) {
	if err := CheckBlockDevice(path); err != nil {
		return 0, fmt.Errorf("block size of %s: %w", path, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("block size of %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	// x/sys has no uint64 getter for this ioctl; IoctlGetInt would write 8
	// bytes into a 4-byte int on 32-bit platforms.
	var size uint64
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKGETSIZE64, uintptr(unsafe.Pointer(&size)))
	if errno != 0 {
		return 0, fmt.Errorf("block size of %s: ioctl BLKGETSIZE64: %w", path, errno)
	}
	return int64(size), nil
}

// sysBlock is where the kernel describes block devices by number.
const sysBlock = "/sys/dev/block"

// DMName returns the device-mapper name of the block device rdev (for an
// LV, lvm2's "vg-lv"), or "" when it is no device-mapper device.
func DMName(rdev uint64) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d:%d/dm/name", sysBlock, unix.Major(rdev), unix.Minor(rdev)))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("device-mapper name of %d:%d: %w", unix.Major(rdev), unix.Minor(rdev), err)
	}
	return strings.TrimSpace(string(b)), nil
}
