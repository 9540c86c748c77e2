package crypt

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

// Layer ends the name of a volume's mapping: lvm2's device-mapper name of
// the LV, then "-crypt", as lvm2 names an LV's internal layers ("vg-lv-real").
// lvm2 has no layer of that name, and a single '-' never occurs inside the
// escaped VG and LV names, so the name is no LV's and maps back to its
// volume (lvm.SplitDMName), which the node's safety checks rely on (a
// directory inside an encrypted volume's filesystem is inside the volume).
const Layer = "crypt"

// maxDMName is the kernel's limit on a device-mapper name (DM_NAME_LEN
// less its NUL).
const maxDMName = 127

// mapperDir is where libdevmapper makes a mapping's device node.
const mapperDir = "/dev/mapper"

// MappingName is the name of the dm-crypt mapping of volume vg/lv. The
// names must be valid lvm2 names (then no '/' or NUL can reach the path),
// and the whole must fit the kernel's limit: else volume.ErrInvalidArgument.
func MappingName(vg, lv string) (string, error) {
	if err := lvm.ValidateVGName(vg); err != nil {
		return "", fmt.Errorf("%w: mapping of %s/%s: %w", volume.ErrInvalidArgument, vg, lv, err)
	}
	if err := lvm.ValidateLVName(lv); err != nil {
		return "", fmt.Errorf("%w: mapping of %s/%s: %w", volume.ErrInvalidArgument, vg, lv, err)
	}
	name := escape(vg) + "-" + escape(lv) + "-" + Layer
	if len(name) > maxDMName {
		return "", fmt.Errorf("%w: the mapping name of %s/%s would be %d bytes, over the kernel's %d",
			volume.ErrInvalidArgument, vg, lv, len(name), maxDMName)
	}
	return name, nil
}

// escape doubles '-' as lvm2 does in device-mapper names.
func escape(s string) string { return strings.ReplaceAll(s, "-", "--") }

// VolumeOf tells the volume whose mapping dmName is (MappingName's
// inverse); ok is false for any other name.
func VolumeOf(dmName string) (vg, lv string, ok bool) {
	if len(dmName) > maxDMName {
		return "", "", false // no such device: the kernel refuses the name
	}
	vg, lv, layer, ok := lvm.SplitDMName(dmName)
	if !ok || layer != Layer {
		return "", "", false
	}
	return vg, lv, true
}

// MappingPath is the device node of mapping name.
func MappingPath(name string) string { return filepath.Join(mapperDir, name) }

// Mapping is an open dm-crypt mapping.
type Mapping struct {
	Name string
	Path string // its device node, /dev/mapper/NAME
	Rdev uint64 // its device number
	// Backing is the device number of the one device it maps.
	Backing uint64
}

// Over is nil when the mapping is LUKS2 over the device numbered
// backing, the volume's LV; else volume.ErrFailedPrecondition: a mapping
// under the volume's name that is not over its LV is not Carve's.
func (m Mapping) Over(backing uint64) error {
	if m.Backing != backing {
		return fmt.Errorf("%w: mapping %s maps device %d:%d, not the volume's LV %d:%d; refusing to use it",
			volume.ErrFailedPrecondition, m.Name, unix.Major(m.Backing), unix.Minor(m.Backing), unix.Major(backing), unix.Minor(backing))
	}
	return nil
}

// sysBlock is where the kernel describes block devices by number; a
// variable for tests.
var sysBlock = "/sys/dev/block"

// Lookup finds mapping name; open is false when there is none. A device
// of that name that is not a LUKS2 mapping of exactly one device is
// volume.ErrFailedPrecondition (not Carve's).
func Lookup(name string) (m Mapping, open bool, err error) {
	m = Mapping{Name: name, Path: MappingPath(name)}
	var st unix.Stat_t
	switch err := unix.Stat(m.Path, &st); {
	case errors.Is(err, unix.ENOENT):
		return m, false, nil
	case err != nil:
		return m, false, fmt.Errorf("look up mapping %s: %w", name, err)
	case st.Mode&unix.S_IFMT != unix.S_IFBLK:
		return m, false, fmt.Errorf("%w: %s is no block device", volume.ErrFailedPrecondition, m.Path)
	}
	m.Rdev = st.Rdev
	dir := fmt.Sprintf("%s/%d:%d", sysBlock, unix.Major(m.Rdev), unix.Minor(m.Rdev))
	uuid, err := os.ReadFile(dir + "/dm/uuid")
	if err != nil {
		return m, false, fmt.Errorf("look up mapping %s: %w", name, err)
	}
	if !strings.HasPrefix(string(uuid), "CRYPT-LUKS2-") {
		return m, false, fmt.Errorf("%w: %s is not a LUKS2 mapping (uuid %q); not Carve's",
			volume.ErrFailedPrecondition, m.Path, strings.TrimSpace(string(uuid)))
	}
	if m.Backing, err = backing(dir); err != nil {
		return m, false, fmt.Errorf("look up mapping %s: %w", name, err)
	}
	return m, true, nil
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
