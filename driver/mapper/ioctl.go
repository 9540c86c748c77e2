package mapper

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel drives device-mapper through its control device's ioctls
// (linux/dm-ioctl.h), as libdevmapper does under dmsetup, without a
// process: a layer's create, reload, suspend, resume and removal each
// cost a dmsetup process before, 0.1-0.3 s in the emulated VM and several
// milliseconds on real hardware, for a few microseconds of the kernel's
// work (docs/performance.md).
//
// What dmsetup did besides the ioctls, Kernel does too: it makes the
// device's node in /dev/mapper on create and removes it on removal, as
// libdevmapper does with udev off (DM_DISABLE_UDEV=1, how Carve ran it
// in its containers); where udevd runs, its rules also make a symlink
// there, which names the same device, and remove it themselves.
type Kernel struct {
	// Observe, when set, is told of each operation as the runner tells of
	// a command (name "dm", args: the operation and the device): the
	// crash tests stop carve after one (driver/crashpoint). Not metrics:
	// an ioctl is no process.
	Observe func(name string, args []string, d time.Duration, err error)
}

// control is device-mapper's control device.
const control = "/dev/mapper/control"

// The ioctl ABI: struct dm_ioctl and struct dm_target_spec.
const (
	dmIoctlSize  = 312 // sizeof(struct dm_ioctl)
	dmTargetSize = 40  // sizeof(struct dm_target_spec)
	dmNameLen    = 128
	dmUUIDLen    = 129
	dmTypeLen    = 16

	dmDevCreate  = 3
	dmDevRemove  = 4
	dmDevSuspend = 6
	dmDevStatus  = 7
	dmTableLoad  = 9

	dmSuspendFlag       = 1 << 1
	dmActivePresentFlag = 1 << 5
)

// dmIoctl is struct dm_ioctl, byte for byte on every Linux architecture
// (its fields are fixed-size and naturally aligned).
type dmIoctl struct {
	Version     [3]uint32
	DataSize    uint32
	DataStart   uint32
	TargetCount uint32
	OpenCount   int32
	Flags       uint32
	EventNr     uint32
	Padding     uint32
	Dev         uint64
	Name        [dmNameLen]byte
	UUID        [dmUUIDLen]byte
	Data        [7]byte
}

// dmTargetSpec is struct dm_target_spec; its parameters follow it.
type dmTargetSpec struct {
	SectorStart uint64
	Length      uint64
	Status      int32
	Next        uint32
	TargetType  [dmTypeLen]byte
}

// Target is one line of a device's table.
type Target struct {
	Start, Length uint64 // in 512-byte sectors
	Type, Params  string
}

// ioctlNumber is _IOWR(0xfd, cmd, struct dm_ioctl).
func ioctlNumber(cmd uintptr) uintptr {
	const iocRead, iocWrite = 2, 1
	return (iocRead|iocWrite)<<30 | dmIoctlSize<<16 | 0xfd<<8 | cmd
}

// header is the request header for device name.
func header(name string) (dmIoctl, error) {
	h := dmIoctl{Version: [3]uint32{4, 0, 0}, DataSize: dmIoctlSize, DataStart: dmIoctlSize}
	if len(name) == 0 || len(name) >= dmNameLen {
		return h, fmt.Errorf("device-mapper name %q: empty or over %d bytes", name, dmNameLen-1)
	}
	copy(h.Name[:], name)
	return h, nil
}

// call runs one ioctl with h and then payload, under ctx: an ioctl cannot
// be cut, so past ctx's end it is left to finish on its own (the kernel
// serialises a device's suspends and resumes, so a later call on it waits
// for this one) and the caller gets ctx's error. It returns the header
// the kernel wrote back.
func (k Kernel) call(ctx context.Context, op string, cmd uintptr, h dmIoctl, payload []byte) (dmIoctl, error) {
	name := string(bytes.TrimRight(h.Name[:], "\x00"))
	start := time.Now()
	type result struct {
		h   dmIoctl
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := ioctl(cmd, h, payload)
		done <- result{out, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		r.err = fmt.Errorf("device-mapper %s of %s: not done at the deadline, left to finish: %w", op, name, ctx.Err())
	}
	if k.Observe != nil {
		k.Observe("dm", []string{op, name}, time.Since(start), r.err)
	}
	return r.h, r.err
}

// ioctl sends h and payload to the control device and reads back the
// header.
func ioctl(cmd uintptr, h dmIoctl, payload []byte) (dmIoctl, error) {
	h.DataSize = uint32(dmIoctlSize + len(payload))
	buf := make([]byte, dmIoctlSize, int(h.DataSize))
	if _, err := binary.Encode(buf, binary.NativeEndian, h); err != nil {
		return h, err
	}
	buf = append(buf, payload...)
	f, err := os.OpenFile(control, os.O_RDWR, 0)
	if err != nil {
		return h, fmt.Errorf("open %s: %w", control, err)
	}
	defer func() { _ = f.Close() }() // opened for the ioctl alone
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), ioctlNumber(cmd), uintptr(unsafe.Pointer(&buf[0])))
	var out dmIoctl
	if _, err := binary.Decode(buf[:dmIoctlSize], binary.NativeEndian, &out); err != nil {
		return h, err
	}
	if errno != 0 {
		return out, errno
	}
	return out, nil
}

// tablePayload encodes targets as DM_TABLE_LOAD reads them: each spec,
// its parameters NUL-terminated, padded to 8 bytes.
func tablePayload(targets []Target) ([]byte, error) {
	var out []byte
	for _, t := range targets {
		if len(t.Type) >= dmTypeLen {
			return nil, fmt.Errorf("target type %q over %d bytes", t.Type, dmTypeLen-1)
		}
		size := (dmTargetSize + len(t.Params) + 1 + 7) &^ 7
		spec := dmTargetSpec{SectorStart: t.Start, Length: t.Length, Next: uint32(size)}
		copy(spec.TargetType[:], t.Type)
		b := make([]byte, size)
		if _, err := binary.Encode(b, binary.NativeEndian, spec); err != nil {
			return nil, err
		}
		copy(b[dmTargetSize:], t.Params)
		out = append(out, b...)
	}
	return out, nil
}

// Create makes device name with uuid and the table targets, live
// (resumed), and its node in /dev/mapper; it returns its device number.
// A device of that name there already is taken as this one when it has
// uuid (a create cut short before: the retry finishes it), and refused
// otherwise.
func (k Kernel) Create(ctx context.Context, name, uuid string, targets []Target) (uint64, error) {
	h, err := header(name)
	if err != nil {
		return 0, err
	}
	if len(uuid) >= dmUUIDLen {
		return 0, fmt.Errorf("device-mapper uuid %q over %d bytes", uuid, dmUUIDLen-1)
	}
	copy(h.UUID[:], uuid)
	out, err := k.call(ctx, "create", dmDevCreate, h, nil)
	if errors.Is(err, unix.EBUSY) {
		out, err = k.adopt(ctx, name, uuid)
	}
	if err != nil {
		return 0, fmt.Errorf("create device-mapper device %s: %w", name, err)
	}
	if out.Flags&dmActivePresentFlag == 0 {
		if err := k.Load(ctx, name, targets); err != nil {
			return 0, k.undoCreate(ctx, name, err)
		}
		if err := k.Resume(ctx, name); err != nil {
			return 0, k.undoCreate(ctx, name, err)
		}
	}
	if err := makeNode(name, out.Dev); err != nil {
		return 0, err
	}
	return out.Dev, nil
}

// adopt takes the existing device name as the one being made when its
// uuid is uuid.
func (k Kernel) adopt(ctx context.Context, name, uuid string) (dmIoctl, error) {
	h, err := header(name)
	if err != nil {
		return h, err
	}
	out, err := k.call(ctx, "status", dmDevStatus, h, nil)
	if err != nil {
		return out, err
	}
	if have := string(bytes.TrimRight(out.UUID[:], "\x00")); have != uuid {
		return out, fmt.Errorf("device %s exists with uuid %q, not %q: %w", name, have, uuid, unix.EBUSY)
	}
	return out, nil
}

// undoCreate removes a device whose table did not go live, and returns
// cause.
func (k Kernel) undoCreate(ctx context.Context, name string, cause error) error {
	if err := k.remove(context.WithoutCancel(ctx), name); err != nil {
		return fmt.Errorf("create device-mapper device %s: %w (and removing it again: %w)", name, cause, err)
	}
	return fmt.Errorf("create device-mapper device %s: %w", name, cause)
}

// Load loads targets as name's inactive table; Resume makes it live.
func (k Kernel) Load(ctx context.Context, name string, targets []Target) error {
	h, err := header(name)
	if err != nil {
		return err
	}
	payload, err := tablePayload(targets)
	if err != nil {
		return err
	}
	h.TargetCount = uint32(len(targets))
	if _, err := k.call(ctx, "load", dmTableLoad, h, payload); err != nil {
		return fmt.Errorf("load the table of %s: %w", name, err)
	}
	return nil
}

// Suspend holds name's I/O, its filesystem flushed and frozen first
// (lockfs, as dmsetup suspend does by default).
func (k Kernel) Suspend(ctx context.Context, name string) error {
	return k.suspend(ctx, "suspend", name, dmSuspendFlag)
}

// Resume lets name's I/O go on (with its inactive table, if one was
// loaded) and thaws its filesystem.
func (k Kernel) Resume(ctx context.Context, name string) error {
	return k.suspend(ctx, "resume", name, 0)
}

func (k Kernel) suspend(ctx context.Context, op, name string, flags uint32) error {
	h, err := header(name)
	if err != nil {
		return err
	}
	h.Flags = flags
	if _, err := k.call(ctx, op, dmDevSuspend, h, nil); err != nil {
		return fmt.Errorf("%s %s: %w", op, name, err)
	}
	return nil
}

// Remove removes device name, numbered rdev, and its node: unix.EBUSY
// while it is open.
func (k Kernel) Remove(ctx context.Context, name string, rdev uint64) error {
	if err := k.remove(ctx, name); err != nil {
		return fmt.Errorf("remove device-mapper device %s: %w", name, err)
	}
	return removeNode(name, rdev)
}

func (k Kernel) remove(ctx context.Context, name string) error {
	h, err := header(name)
	if err != nil {
		return err
	}
	_, err = k.call(ctx, "remove", dmDevRemove, h, nil)
	return err
}

// makeNode makes /dev/mapper/name a block node numbered rdev, as
// libdevmapper does with udev off: one that is there and names rdev
// (udevd's symlink, or a node made before) is kept; another is replaced.
func makeNode(name string, rdev uint64) error {
	path := Path(name)
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == rdev {
		return nil
	}
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		return fmt.Errorf("node of %s: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("node of %s: %w", name, err)
	}
	if err := unix.Mknod(path, unix.S_IFBLK|0o600, int(rdev)); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("node of %s: %w", name, err)
	}
	return nil
}

// removeNode removes /dev/mapper/name when it is the node of the device
// numbered rdev that Kernel made; udevd's symlink is udevd's to remove.
func removeNode(name string, rdev uint64) error {
	path := Path(name)
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK || st.Rdev != rdev {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the node of %s: %w", name, err)
	}
	return nil
}
