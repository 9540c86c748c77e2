package nodefs

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"carve.dev/carve/driver/volume"
)

// MkfsOptions are mkfs arguments a StorageClass asks for, vetted for one
// filesystem by ParseMkfsOptions, the only way to make them; the zero
// value is none. FormatAndMount gives them to mkfs when, and only when, it
// formats a blank device: a filesystem that is there is never changed.
type MkfsOptions struct {
	fsType string
	args   []string
}

// IsZero tells that there are no options.
func (o MkfsOptions) IsZero() bool { return len(o.args) == 0 }

// Args are the arguments, in the order given.
func (o MkfsOptions) Args() []string { return slices.Clone(o.args) }

// has tells whether the options set flag.
func (o MkfsOptions) has(flag string) bool {
	for i := 0; i < len(o.args); i++ {
		if o.args[i] == flag {
			return true
		}
		if vettedFlag(o.fsType, o.args[i]).check != nil {
			i++ // its value
		}
	}
	return false
}

// maxMkfsOptions bounds the text of a class's options: the vetted set
// written out in full is far shorter.
const maxMkfsOptions = 1024

// A vetted mkfs flag: check reads its value (nil: it takes none).
type mkfsFlag struct {
	flag  string
	check func(string) error
}

// mkfsFlags is the vetted set per filesystem: options that shape the new
// filesystem (sizes, counts, features), whose every value is read here;
// each flag at most once, its value as the next word. Left out on purpose:
// what names another device or file (ext4 -J device=, -d; xfs -l logdev=,
// -r rtdev=; btrfs --rootdir), what would make every volume of a class
// alike where they must differ (labels, UUIDs), what makes something else
// than a filesystem the kernel mounts (ext4 -O journal_dev), and what
// changes how the device is read (offsets, -E offset=). Combinations the
// tools refuse (an xfs inode smaller than crc=1 needs) are mkfs's to
// refuse, at the format: volume.ErrCannotFormat.
var mkfsFlags = map[string][]mkfsFlag{
	"ext4": {
		{"-b", oneOf("1024", "2048", "4096")},  // block size
		{"-i", intIn(1024, 64<<20)},            // bytes per inode
		{"-I", powerOfTwo(128, 4096)},          // inode size
		{"-N", intIn(1, 1<<32-1)},              // inodes
		{"-m", percentIn(0, 50)},               // blocks reserved for root
		{"-E", subOptions(ext4Extended, true)}, // extended options
		{"-O", features(ext4Features)},         // features, ^ clears one
	},
	"xfs": {
		{"-b", subOptions(map[string]func(string) error{"size": powerOfTwo(512, 65536)}, false)},
		{"-i", subOptions(map[string]func(string) error{"size": powerOfTwo(256, 2048), "maxpct": intIn(0, 100)}, false)},
		{"-m", subOptions(map[string]func(string) error{
			"crc": zeroOrOne, "reflink": zeroOrOne, "bigtime": zeroOrOne, "finobt": zeroOrOne, "rmapbt": zeroOrOne, "inobtcount": zeroOrOne,
		}, false)},
		{"-n", subOptions(map[string]func(string) error{"size": powerOfTwo(512, 65536)}, false)}, // directory block size
		{"-K", nil}, // no discard at mkfs
	},
	"btrfs": {
		{"-n", powerOfTwo(4096, 65536)}, // node size
		{"-m", oneOf("single", "dup")},  // metadata profile (one device)
		{"-d", oneOf("single", "dup")},  // data profile
		{"-K", nil},                     // no discard at mkfs
	},
}

// ext4Extended are mke2fs's -E options in the vetted set: lazy
// initialisation (0 makes mkfs write the inode tables and journal now,
// instead of the kernel in the background after the first mount), discard
// at mkfs, the RAID geometry in blocks (a striped volume's), and the root
// directory's owner (uid:gid), so that a pod that runs as a user can write
// the new volume.
var ext4Extended = map[string]func(string) error{
	"lazy_itable_init":  zeroOrOneOrBare,
	"lazy_journal_init": zeroOrOneOrBare,
	"discard":           bare,
	"nodiscard":         bare,
	"stride":            intIn(1, 1<<32-1),
	"stripe_width":      intIn(1, 1<<32-1),
	"root_owner":        uidGID,
}

// ext4Features are the features -O may set or clear (ext4(5)), all of
// which the kernel's ext4 mounts.
var ext4Features = words(`64bit dir_index dir_nlink ea_inode encrypt extent extra_isize fast_commit filetype flex_bg
	has_journal huge_file inline_data large_dir large_file metadata_csum metadata_csum_seed orphan_file project
	quota resize_inode sparse_super sparse_super2 stable_inodes uninit_bg verity`)

// MkfsFlags lists the vetted flags of fsType ("" → ext4), for messages
// and the README.
func MkfsFlags(fsType string) []string {
	var out []string
	for _, f := range mkfsFlags[orDefaultFS(fsType)] {
		out = append(out, f.flag)
	}
	return out
}

func orDefaultFS(fsType string) string {
	if fsType == "" {
		return volume.DefaultFSType
	}
	return fsType
}

func vettedFlag(fsType, flag string) mkfsFlag {
	for _, f := range mkfsFlags[fsType] {
		if f.flag == flag {
			return f
		}
	}
	return mkfsFlag{}
}

// ParseMkfsOptions reads s, a StorageClass's mkfs options for fsType (""
// → ext4): words separated by spaces, each a vetted flag of fsType
// (mkfsFlags) followed, when it takes one, by its value. Anything else (a
// flag outside the set, a flag twice, a value out of range or not a power
// of two where the tool wants one) is an error wrapping
// volume.ErrInvalidArgument that says what the filesystem takes. "" is no
// options.
func ParseMkfsOptions(fsType, s string) (MkfsOptions, error) {
	fsType = orDefaultFS(fsType)
	if _, ok := mkfsFlags[fsType]; !ok {
		return MkfsOptions{}, fmt.Errorf("%w: mkfs options for %q: not a filesystem Carve makes (%v)", volume.ErrInvalidArgument, fsType, volume.FSTypes)
	}
	if len(s) > maxMkfsOptions {
		return MkfsOptions{}, fmt.Errorf("%w: mkfs options for %s: %d bytes, longer than %d", volume.ErrInvalidArgument, fsType, len(s), maxMkfsOptions)
	}
	o := MkfsOptions{fsType: fsType}
	words := strings.Fields(s)
	for i := 0; i < len(words); i++ {
		w := words[i]
		f := vettedFlag(fsType, w)
		switch {
		case f.flag == "":
			return MkfsOptions{}, fmt.Errorf("%w: mkfs option %q for %s: not in the vetted set (%s)", volume.ErrInvalidArgument, w, fsType,
				strings.Join(MkfsFlags(fsType), " "))
		case o.has(w):
			return MkfsOptions{}, fmt.Errorf("%w: mkfs option %s for %s: given twice", volume.ErrInvalidArgument, w, fsType)
		}
		o.args = append(o.args, w)
		if f.check == nil {
			continue
		}
		if i+1 == len(words) {
			return MkfsOptions{}, fmt.Errorf("%w: mkfs option %s for %s: its value is missing", volume.ErrInvalidArgument, w, fsType)
		}
		i++
		if err := f.check(words[i]); err != nil {
			return MkfsOptions{}, fmt.Errorf("%w: mkfs option %s %q for %s: %w", volume.ErrInvalidArgument, w, words[i], fsType, err)
		}
		o.args = append(o.args, words[i])
	}
	return o, nil
}

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		if !slices.Contains(values, v) {
			return fmt.Errorf("want one of %s", strings.Join(values, ", "))
		}
		return nil
	}
}

// number reads a decimal number without sign, leading zeros or spaces:
// what it says is what the tool reads.
func number(v string) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || strconv.FormatUint(n, 10) != v {
		return 0, errors.New("want a decimal number")
	}
	return n, nil
}

func intIn(lo, hi uint64) func(string) error {
	return func(v string) error {
		n, err := number(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("want an integer from %d to %d", lo, hi)
		}
		return nil
	}
}

func powerOfTwo(lo, hi uint64) func(string) error {
	return func(v string) error {
		n, err := number(v)
		if err != nil || n < lo || n > hi || bits.OnesCount64(n) != 1 {
			return fmt.Errorf("want a power of two from %d to %d", lo, hi)
		}
		return nil
	}
}

// percentIn reads a percentage with at most two decimals: 5, 0.5, 1.25.
func percentIn(lo, hi uint64) func(string) error {
	return func(v string) error {
		whole, frac, hasFrac := strings.Cut(v, ".")
		n, err := number(whole)
		ok := err == nil && n >= lo && (n < hi || n == hi && strings.Trim(frac, "0") == "")
		if hasFrac {
			ok = ok && len(frac) >= 1 && len(frac) <= 2 && strings.Trim(frac, "0123456789") == ""
		}
		if !ok {
			return fmt.Errorf("want a percentage from %d to %d, at most two decimals", lo, hi)
		}
		return nil
	}
}

func zeroOrOne(v string) error { return oneOf("0", "1")(v) }

// zeroOrOneOrBare is for a -E option given bare (on) or =0/=1; bare sees
// the value "" from subOptions.
func zeroOrOneOrBare(v string) error { return oneOf("", "0", "1")(v) }

func bare(v string) error {
	if v != "" {
		return errors.New("takes no value")
	}
	return nil
}

// uidGID reads uid:gid, each a 32-bit id other than -1's 4294967295.
func uidGID(v string) error {
	uid, gid, ok := strings.Cut(v, ":")
	if !ok || intIn(0, 1<<32-2)(uid) != nil || intIn(0, 1<<32-2)(gid) != nil {
		return errors.New("want uid:gid, two numbers such as 1000:1000")
	}
	return nil
}

// subOptions reads a comma-separated list of key=value (or, where
// bareKeys, key alone: the check then sees ""), each key at most once and
// in known, its value read by known[key].
func subOptions(known map[string]func(string) error, bareKeys bool) func(string) error {
	return func(v string) error {
		var seen []string
		for _, item := range strings.Split(v, ",") {
			key, value, hasValue := strings.Cut(item, "=")
			check, ok := known[key]
			switch {
			case !ok:
				return fmt.Errorf("%q is not in the vetted set (%s)", key, strings.Join(sortedKeys(known), ", "))
			case slices.Contains(seen, key):
				return fmt.Errorf("%s given twice", key)
			case !hasValue && !bareKeys:
				return fmt.Errorf("want %s=value", key)
			case hasValue && value == "":
				return fmt.Errorf("%s= without a value", key)
			}
			if err := check(value); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			seen = append(seen, key)
		}
		return nil
	}
}

// features reads a comma-separated feature list, each known, at most
// once, and set (name) or cleared (^name).
func features(known []string) func(string) error {
	return func(v string) error {
		var seen []string
		for _, item := range strings.Split(v, ",") {
			name := strings.TrimPrefix(item, "^")
			switch {
			case !slices.Contains(known, name):
				return fmt.Errorf("feature %q is not in the vetted set (%s)", item, strings.Join(known, " "))
			case slices.Contains(seen, name):
				return fmt.Errorf("feature %s given twice", name)
			}
			seen = append(seen, name)
		}
		return nil
	}
}

func sortedKeys(m map[string]func(string) error) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
