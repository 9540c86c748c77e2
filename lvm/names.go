package lvm

import (
	"fmt"
	"strings"
)

// Limits from lvm2 (lvm(8) "VALID NAMES", lib/misc/lvm-string.c).
const (
	maxNameLen = 127  // NAME_LEN 128 including the terminating NUL
	maxTagLen  = 1024 // NAME_LEN * 8
	// maxVGLVLen bounds len(vg)+len(lv): lvm2 refuses "vg/lv" when
	// len(vg)+len(lv)+3 reaches NAME_LEN ("Internal error: LV name ...
	// length 128 is not supported", measured with lvm2 2.03.16).
	maxVGLVLen = 124
)

// reservedLVSubstrings are names of LVM's internal sub-LVs; lvcreate rejects
// any LV name containing one. lvm(8) lists most of them; lvm2 2.03 also
// reserves _cpool, _cvol and _imeta (verified with lvcreate).
var reservedLVSubstrings = []string{
	"_cdata", "_cmeta", "_corig", "_cpool", "_cvol", "_imeta", "_iorig",
	"_mimage", "_mlog", "_pmspare", "_rimage", "_rmeta", "_tdata", "_tmeta",
	"_vdata", "_vorigin", "_wcorig",
}

// reservedLVPrefixes: lvm2 rejects names *starting* with these, not only
// names equal to them as lvm(8) says.
var reservedLVPrefixes = []string{"snapshot", "pvmove"}

func invalid(kind, name, why string) error {
	return fmt.Errorf("%w: %s %q %s", ErrInvalidName, kind, name, why)
}

// validateName applies the rules VG and LV names share.
func validateName(kind, name string) error {
	switch {
	case name == "":
		return invalid(kind, name, "is empty")
	case len(name) > maxNameLen:
		return invalid(kind, name, fmt.Sprintf("is longer than %d characters", maxNameLen))
	case name == "." || name == "..":
		return invalid(kind, name, "is reserved")
	case name[0] == '-':
		return invalid(kind, name, "starts with '-'")
	}
	for i := 0; i < len(name); i++ {
		if !isNameChar(name[i]) {
			return invalid(kind, name, fmt.Sprintf("contains %q (allowed: a-z A-Z 0-9 + _ . -)", name[i]))
		}
	}
	return nil
}

func isNameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '+' || c == '_' || c == '.' || c == '-'
}

// ValidateVGName checks a volume group name against lvm2's rules.
func ValidateVGName(name string) error {
	return validateName("volume group name", name)
}

// ValidateLVName checks a logical volume name against lvm2's rules,
// including its reserved prefixes and substrings.
func ValidateLVName(name string) error {
	const kind = "logical volume name"
	if err := validateName(kind, name); err != nil {
		return err
	}
	for _, p := range reservedLVPrefixes {
		if strings.HasPrefix(name, p) {
			return invalid(kind, name, fmt.Sprintf("starts with the reserved %q", p))
		}
	}
	for _, s := range reservedLVSubstrings {
		if strings.Contains(name, s) {
			return invalid(kind, name, fmt.Sprintf("contains the reserved %q", s))
		}
	}
	return nil
}

// validateVGLV checks a VG and an LV name and that lvm2 accepts the pair.
func validateVGLV(vg, lv string) error {
	if err := ValidateVGName(vg); err != nil {
		return err
	}
	if err := ValidateLVName(lv); err != nil {
		return err
	}
	if len(vg)+len(lv) > maxVGLVLen {
		return fmt.Errorf("%w: %s/%s: volume group and logical volume names together exceed %d characters",
			ErrInvalidName, vg, lv, maxVGLVLen)
	}
	return nil
}

// ValidateTag checks an LVM tag. lvm2 would accept a leading '-', but such
// a tag reads like an option on a command line, so it is refused here.
func ValidateTag(tag string) error {
	switch {
	case tag == "":
		return invalid("tag", tag, "is empty")
	case len(tag) > maxTagLen:
		return invalid("tag", tag, fmt.Sprintf("is longer than %d characters", maxTagLen))
	case tag[0] == '-':
		return invalid("tag", tag, "starts with '-'")
	}
	for i := 0; i < len(tag); i++ {
		if !isNameChar(tag[i]) && !strings.ContainsRune("/=!:&#", rune(tag[i])) {
			return invalid("tag", tag, fmt.Sprintf("contains %q (allowed: A-Z a-z 0-9 _ + . - / = ! : & #)", tag[i]))
		}
	}
	return nil
}

func validateTags(tags []string) error {
	for _, t := range tags {
		if err := ValidateTag(t); err != nil {
			return err
		}
	}
	return nil
}

// dmName is the device-mapper name lvm2 gives vg/lv (layer "" for the LV
// itself): each part with its '-' doubled, joined by '-' (libdevmapper's
// dm_build_dm_name).
func dmName(vg, lv, layer string) string {
	n := strings.ReplaceAll(vg, "-", "--") + "-" + strings.ReplaceAll(lv, "-", "--")
	if layer != "" {
		n += "-" + strings.ReplaceAll(layer, "-", "--")
	}
	return n
}

// SplitDMName splits the device-mapper name lvm2 gives an LV's device
// ("vg-lv": each name with its own '-' doubled, joined by one '-'; an
// internal layer adds "-layer", as in "vg-pool-tpool") into the VG, the LV
// and the layer ("" for the LV itself). ok is false for a name lvm2 does
// not make, or whose parts are not valid VG and LV names. /dev/mapper and
// /sys/dev/block/*/dm/name show these names.
func SplitDMName(dm string) (vg, lv, layer string, ok bool) {
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(dm); i++ {
		switch {
		case dm[i] != '-':
			cur.WriteByte(dm[i])
		case i+1 < len(dm) && dm[i+1] == '-':
			cur.WriteByte('-')
			i++
		default:
			parts = append(parts, cur.String())
			cur.Reset()
		}
	}
	parts = append(parts, cur.String())
	if len(parts) < 2 || len(parts) > 3 || ValidateVGName(parts[0]) != nil || ValidateLVName(parts[1]) != nil ||
		(len(parts) == 3 && parts[2] == "") { // "vg-lv-": lvm2 makes no empty layer
		return "", "", "", false
	}
	if len(parts) == 3 {
		layer = parts[2]
	}
	return parts[0], parts[1], layer, true
}
