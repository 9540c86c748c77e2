package lvm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A device's status asked of device-mapper directly, as `dmsetup status`
// does, by the DM_TABLE_STATUS ioctl on its control device: no lvm2 and
// no dmsetup process, so a Cache can ask it every second (cacheprint.go).
// The layout is the kernel's uapi linux/dm-ioctl.h, version 4, in the
// machine's byte order: a struct dm_ioctl, then at its data_start one
// struct dm_target_spec per target, each followed by its status string;
// each spec's next is the offset of the next one from the first.

const (
	dmControl        = "/dev/mapper/control"
	dmIoctlSize      = 312 // sizeof(struct dm_ioctl)
	dmTargetSpecSize = 40  // sizeof(struct dm_target_spec)
	dmNameLen        = 128 // DM_NAME_LEN, the NUL included
	dmTypeLen        = 16  // DM_MAX_TYPE_NAME
	// _IOWR(DM_IOCTL 0xfd, DM_TABLE_STATUS_CMD 12, struct dm_ioctl).
	dmTableStatusIoctl = 0xc138fd0c
	dmBufferFullFlag   = 1 << 8 // out: the status did not fit
	// DM_NOFLUSH_FLAG: a thin pool's status without committing its
	// metadata first, as lvs asks it; the counts are the in-core ones.
	dmNoFlushFlag = 1 << 11
	// What a thin pool's status needs many times over; a table of many
	// targets may take more (dmTableStatus grows it).
	dmStatusBuffer = 16 << 10
	dmStatusMax    = 1 << 20
)

// dmTarget is one target of a device's live table and its status.
type dmTarget struct {
	start, length uint64 // sectors
	kind          string // target type: "thin-pool", "linear", ...
	status        string
}

// errDMBufferFull: the reply did not fit; ask again with more room.
var errDMBufferFull = errors.New("device-mapper status: buffer full")

// dmStatusRequest is the ioctl's input for the device named name in a
// buffer of size bytes.
func dmStatusRequest(name string, size int) ([]byte, error) {
	if name == "" || len(name) >= dmNameLen || strings.IndexByte(name, 0) >= 0 {
		return nil, fmt.Errorf("device-mapper name %q: empty or too long", name)
	}
	b := make([]byte, size)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], 4) // version 4.0.0: any 4.x kernel answers
	ne.PutUint32(b[12:], uint32(size))
	ne.PutUint32(b[16:], dmIoctlSize)
	ne.PutUint32(b[28:], dmNoFlushFlag)
	copy(b[48:48+dmNameLen], name)
	return b, nil
}

// parseDMStatus reads the targets of a DM_TABLE_STATUS reply.
func parseDMStatus(b []byte) ([]dmTarget, error) {
	if len(b) < dmIoctlSize {
		return nil, fmt.Errorf("device-mapper status: reply of %d bytes, want at least %d", len(b), dmIoctlSize)
	}
	ne := binary.NativeEndian
	if v := ne.Uint32(b[0:]); v != 4 {
		return nil, fmt.Errorf("device-mapper status: interface version %d, want 4", v)
	}
	if ne.Uint32(b[28:])&dmBufferFullFlag != 0 {
		return nil, errDMBufferFull
	}
	size, start, count := ne.Uint32(b[12:]), ne.Uint32(b[16:]), ne.Uint32(b[20:])
	if count == 0 {
		return nil, nil // no live table
	}
	if start < dmIoctlSize || size > uint32(len(b)) || start > size {
		return nil, fmt.Errorf("device-mapper status: data at %d..%d of a %d byte reply", start, size, len(b))
	}
	return parseTargetSpecs(b[start:size], count)
}

// parseTargetSpecs reads count target specs and their status strings from
// data, the reply's data area.
func parseTargetSpecs(data []byte, count uint32) ([]dmTarget, error) {
	if count > uint32(len(data)/dmTargetSpecSize) {
		return nil, fmt.Errorf("device-mapper status: %d targets in %d bytes", count, len(data))
	}
	ne := binary.NativeEndian
	out := make([]dmTarget, 0, count)
	off := 0
	for i := uint32(0); i < count; i++ {
		if off+dmTargetSpecSize > len(data) {
			return nil, fmt.Errorf("device-mapper status: target %d at %d beyond the reply's %d bytes", i, off, len(data))
		}
		spec := data[off:]
		kind, _, _ := strings.Cut(string(spec[24:24+dmTypeLen]), "\x00")
		status, _, ended := strings.Cut(string(spec[dmTargetSpecSize:]), "\x00")
		if !ended {
			return nil, fmt.Errorf("device-mapper status: target %d's status does not end in the reply", i)
		}
		out = append(out, dmTarget{start: ne.Uint64(spec[0:]), length: ne.Uint64(spec[8:]), kind: kind, status: status})
		next := int(ne.Uint32(spec[20:]))
		if i+1 < count && next <= off {
			return nil, fmt.Errorf("device-mapper status: target %d's next (%d) does not move past it (%d)", i, next, off)
		}
		off = next
	}
	return out, nil
}

// dmTableStatus asks device-mapper, through the open control device ctl,
// for the live table's status of the device named name. A name with no
// device fails with unix.ENXIO.
func dmTableStatus(ctl int, name string) ([]dmTarget, error) {
	for size := dmStatusBuffer; size <= dmStatusMax; size *= 4 {
		b, err := dmStatusRequest(name, size)
		if err != nil {
			return nil, err
		}
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(ctl), dmTableStatusIoctl, uintptr(unsafe.Pointer(&b[0])))
		runtime.KeepAlive(b)
		if errno != 0 {
			return nil, fmt.Errorf("device-mapper status of %s: %w", name, errno)
		}
		targets, err := parseDMStatus(b)
		if !errors.Is(err, errDMBufferFull) {
			if err != nil {
				err = fmt.Errorf("%s: %w", name, err)
			}
			return targets, err
		}
	}
	return nil, fmt.Errorf("device-mapper status of %s: more than %d bytes", name, dmStatusMax)
}

// poolUsage is what a thin pool's status says of its fill: blocks used of
// the metadata and data devices, the pool's mode ("rw", "ro",
// "out_of_data_space"; "Fail" or "Error" alone, without counts, for a
// failed pool) and whether the kernel flagged its metadata for thin_check.
type poolUsage struct {
	metaUsed, metaTotal, dataUsed, dataTotal uint64
	mode                                     string
	needsCheck                               bool
}

func (u poolUsage) String() string {
	if u.dataTotal == 0 {
		return u.mode
	}
	s := fmt.Sprintf("data %d/%d meta %d/%d %s", u.dataUsed, u.dataTotal, u.metaUsed, u.metaTotal, u.mode)
	if u.needsCheck {
		s += " needs_check"
	}
	return s
}

// parseThinPoolUsage reads a thin-pool target's status (the kernel's
// thin-provisioning.rst): `<transaction id> <used>/<total metadata blocks>
// <used>/<total data blocks> <held metadata root> ro|rw|out_of_data_space
// [no_]discard_passdown|ignore_discard error|queue_if_no_space
// needs_check|- <metadata low watermark>`, the fields after the mode
// varying with the kernel's version.
func parseThinPoolUsage(status string) (poolUsage, error) {
	f := strings.Fields(status)
	if len(f) == 1 && (f[0] == "Fail" || f[0] == "Error") {
		return poolUsage{mode: f[0]}, nil
	}
	var u poolUsage
	if len(f) < 5 {
		return u, fmt.Errorf("thin pool status %q: too few fields", status)
	}
	_, err := strconv.ParseUint(f[0], 10, 64)
	if err == nil {
		u.metaUsed, u.metaTotal, err = parseUsedOf(f[1])
	}
	if err == nil {
		u.dataUsed, u.dataTotal, err = parseUsedOf(f[2])
	}
	if err == nil && f[3] != "-" {
		_, err = strconv.ParseUint(f[3], 10, 64)
	}
	if err != nil {
		return poolUsage{}, fmt.Errorf("thin pool status %q: %w", status, err)
	}
	switch u.mode = f[4]; u.mode {
	case "rw", "ro", "out_of_data_space":
	default:
		return poolUsage{}, fmt.Errorf("thin pool status %q: unknown mode %q", status, u.mode)
	}
	for _, x := range f[5:] {
		u.needsCheck = u.needsCheck || x == "needs_check"
	}
	return u, nil
}

// parseUsedOf reads "<used>/<total>" blocks.
func parseUsedOf(s string) (used, total uint64, err error) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not used/total", s)
	}
	if used, err = strconv.ParseUint(a, 10, 64); err == nil {
		total, err = strconv.ParseUint(b, 10, 64)
	}
	if err == nil && (total == 0 || used > total) {
		err = fmt.Errorf("%q: %d of %d blocks used", s, used, total)
	}
	return used, total, err
}
