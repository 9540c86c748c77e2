package crypt

import (
	"carve.dev/carve/driver/mapper"
)

// Layer ends the name of a volume's mapping: lvm2's device-mapper name of
// the LV, then "-crypt" (see mapper.Name), which the node's safety checks
// rely on (a directory inside an encrypted volume's filesystem is inside
// the volume).
const Layer = "crypt"

// luksUUIDPrefix starts the device-mapper UUID cryptsetup gives a LUKS2
// mapping.
const luksUUIDPrefix = "CRYPT-LUKS2-"

// MappingName is the name of the dm-crypt mapping of volume vg/lv
// (mapper.Name): volume.ErrInvalidArgument for names lvm2 refuses or too
// long for the kernel.
func MappingName(vg, lv string) (string, error) { return mapper.Name(vg, lv, Layer) }

// VolumeOf tells the volume whose mapping dmName is (MappingName's
// inverse); ok is false for any other name.
func VolumeOf(dmName string) (vg, lv string, ok bool) { return mapper.VolumeOf(dmName, Layer) }

// Mapping is an open dm-crypt mapping; Over tells whether it maps the
// volume's LV.
type Mapping = mapper.Device

// Lookup finds mapping name; open is false when there is none. A device
// of that name that is not a LUKS2 mapping of exactly one device is
// volume.ErrFailedPrecondition (not Carve's).
func Lookup(name string) (m Mapping, open bool, err error) {
	return mapper.Lookup(name, luksUUIDPrefix)
}
