// Package mapper finds and drives the device-mapper devices Carve puts
// above a volume's LV on its node: the dm-crypt mapping of an encrypted
// volume (driver/crypt opens it) and the linear layer of every other
// staged filesystem (Linear). Both carry the filesystem; both are named
// after their volume (Name), so that the node's safety checks can tell the
// volume a mount belongs to from the device under it (VolumeOf).
//
// A device of one of those names is used only after Lookup has checked
// that it is Carve's kind (its device-mapper UUID's prefix) and Over that
// it maps exactly the volume's LV: a device someone else made under the
// name is refused, never used, suspended or removed.
package mapper

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// maxDMName is the kernel's limit on a device-mapper name (DM_NAME_LEN
// less its NUL).
const maxDMName = 127

// Dir is where libdevmapper makes a device's node.
const Dir = "/dev/mapper"

// Name is the device-mapper name of volume vg/lv's device of kind layer:
// lvm2's name of the LV, then "-" and the layer, as lvm2 names an LV's
// internal layers ("vg-lv-real"). Carve's layers are none of lvm2's, and a
// single '-' never occurs inside the escaped VG and LV names, so the name
// is no LV's and maps back to its volume (VolumeOf). The names must be
// valid lvm2 names (then no '/' or NUL can reach a path), and the whole
// must fit the kernel's limit: else volume.ErrInvalidArgument.
func Name(vg, lv, layer string) (string, error) {
	if err := lvm.ValidateVGName(vg); err != nil {
		return "", fmt.Errorf("%w: %s device of %s/%s: %w", volume.ErrInvalidArgument, layer, vg, lv, err)
	}
	if err := lvm.ValidateLVName(lv); err != nil {
		return "", fmt.Errorf("%w: %s device of %s/%s: %w", volume.ErrInvalidArgument, layer, vg, lv, err)
	}
	name := escape(vg) + "-" + escape(lv) + "-" + layer
	if len(name) > maxDMName {
		return "", fmt.Errorf("%w: the %s device name of %s/%s would be %d bytes, over the kernel's %d",
			volume.ErrInvalidArgument, layer, vg, lv, len(name), maxDMName)
	}
	return name, nil
}

// escape doubles '-' as lvm2 does in device-mapper names.
func escape(s string) string { return strings.ReplaceAll(s, "-", "--") }

// VolumeOf tells the volume whose device of kind layer dmName is (Name's
// inverse); ok is false for any other name.
func VolumeOf(dmName, layer string) (vg, lv string, ok bool) {
	if len(dmName) > maxDMName {
		return "", "", false // no such device: the kernel refuses the name
	}
	vg, lv, got, ok := lvm.SplitDMName(dmName)
	if !ok || got != layer {
		return "", "", false
	}
	return vg, lv, true
}

// Path is the device node of the device-mapper device name.
func Path(name string) string { return filepath.Join(Dir, name) }

// Device is a device-mapper device above a volume's LV.
type Device struct {
	Name string
	Path string // its device node, /dev/mapper/NAME
	Rdev uint64 // its device number
	// Backing is the device number of the one device it maps.
	Backing uint64
	// Sectors is its size in 512-byte sectors.
	Sectors uint64
	// Suspended: its I/O is held (dmsetup suspend).
	Suspended bool
}

// Over is nil when the device maps the device numbered backing, the
// volume's LV; else volume.ErrFailedPrecondition: a device under the
// volume's name that is not over its LV is not Carve's.
func (d Device) Over(backing uint64) error {
	if d.Backing != backing {
		return fmt.Errorf("%w: %s maps device %d:%d, not the volume's LV %d:%d; refusing to use it",
			volume.ErrFailedPrecondition, d.Name, unix.Major(d.Backing), unix.Minor(d.Backing), unix.Major(backing), unix.Minor(backing))
	}
	return nil
}

// sysBlock is where the kernel describes block devices by number; a
// variable for tests.
var sysBlock = "/sys/dev/block"

// Lookup finds the device-mapper device name; found is false when there
// is none. A device of that name whose UUID does not start with
// uuidPrefix (Carve's kind), or that maps other than exactly one device,
// is volume.ErrFailedPrecondition: not Carve's.
//
// A node whose device the kernel does not describe is no device yet:
// device-mapper registers a device's disk (its sysfs directory) at its
// first table load, so a create cut short before the load leaves a
// numbered device with no table, whose node a repair (vgmknodes, dmsetup
// mknodes) may have made meanwhile. found is false then, and Kernel.Create
// finishes that device (the crash matrix found the state: NodeStage
// stopped after device-mapper's create failed every retry).
func Lookup(name, uuidPrefix string) (d Device, found bool, err error) {
	d = Device{Name: name, Path: Path(name)}
	var st unix.Stat_t
	switch err := unix.Stat(d.Path, &st); {
	case errors.Is(err, unix.ENOENT):
		return d, false, nil
	case err != nil:
		return d, false, fmt.Errorf("look up %s: %w", name, err)
	case st.Mode&unix.S_IFMT != unix.S_IFBLK:
		return d, false, fmt.Errorf("%w: %s is no block device", volume.ErrFailedPrecondition, d.Path)
	}
	d.Rdev = st.Rdev
	if _, err := os.Stat(devDir(d.Rdev)); errors.Is(err, fs.ErrNotExist) {
		return d, false, nil
	}
	if err := d.describe(uuidPrefix); err != nil {
		return d, false, err
	}
	return d, true, nil
}

// describe reads what sysfs says of d.Rdev: its UUID must start with
// uuidPrefix; then the one device it maps, its size, its suspension.
func (d *Device) describe(uuidPrefix string) error {
	dir := devDir(d.Rdev)
	uuid, err := os.ReadFile(dir + "/dm/uuid")
	if err != nil {
		return fmt.Errorf("look up %s: %w", d.Name, err)
	}
	if !strings.HasPrefix(string(uuid), uuidPrefix) {
		return fmt.Errorf("%w: %s is not a device of Carve's kind %s (uuid %q)",
			volume.ErrFailedPrecondition, d.Path, uuidPrefix, strings.TrimSpace(string(uuid)))
	}
	if d.Backing, err = backing(dir); err != nil {
		return fmt.Errorf("look up %s: %w", d.Name, err)
	}
	if d.Sectors, err = readUint(dir + "/size"); err != nil {
		return fmt.Errorf("look up %s: %w", d.Name, err)
	}
	suspended, err := readUint(dir + "/dm/suspended")
	if err != nil {
		return fmt.Errorf("look up %s: %w", d.Name, err)
	}
	d.Suspended = suspended == 1
	return nil
}

// devDir is the sysfs directory of the block device numbered rdev.
func devDir(rdev uint64) string {
	return fmt.Sprintf("%s/%d:%d", sysBlock, unix.Major(rdev), unix.Minor(rdev))
}

// Sectors is the size of the block device numbered rdev in 512-byte
// sectors, as the kernel has it.
func Sectors(rdev uint64) (uint64, error) { return readUint(devDir(rdev) + "/size") }

// readUint reads a sysfs file holding one unsigned number.
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var n uint64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &n); err != nil {
		return 0, fmt.Errorf("%s: %q: %w", path, b, err)
	}
	return n, nil
}

// backing reads the device number of the one device under the block
// device whose sysfs directory is dir.
func backing(dir string) (uint64, error) {
	slaves, err := os.ReadDir(dir + "/slaves")
	if err != nil {
		return 0, err
	}
	if len(slaves) != 1 {
		return 0, fmt.Errorf("%w: %s maps %d devices, want 1", volume.ErrFailedPrecondition, dir, len(slaves))
	}
	b, err := os.ReadFile(filepath.Join(dir, "slaves", slaves[0].Name(), "dev"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%w: %s: its device went away", volume.ErrFailedPrecondition, dir)
	}
	if err != nil {
		return 0, err
	}
	var major, minor uint32
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &major, &minor); err != nil {
		return 0, fmt.Errorf("device number %q: %w", b, err)
	}
	return unix.Mkdev(major, minor), nil
}
