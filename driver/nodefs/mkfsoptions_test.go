package nodefs

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"carve.dev/carve/driver/volume"
)

func TestParseMkfsOptions(t *testing.T) {
	good := map[string][]string{
		"ext4": {"", "  ", "-N 200000", "-b 1024", "-b 4096 -i 16384 -I 512 -m 1.5",
			"-E lazy_itable_init=0,lazy_journal_init=0", "-E lazy_itable_init,nodiscard", "-E stride=16,stripe_width=64",
			"-E root_owner=1000:1000", "-O ^has_journal,fast_commit", "-m 0", "-m 50", "-m 50.00", "-N 4294967295"},
		"xfs": {"-i size=1024", "-b size=4096", "-m reflink=0", "-m crc=1,reflink=1,bigtime=1", "-i size=512,maxpct=25",
			"-n size=16384", "-K", "-K -m reflink=0"},
		"btrfs": {"-n 32768", "-m dup -d single", "-K"},
	}
	bad := map[string][]string{
		"ext4": {"-N", "-N 0", "-N -1", "-N 4294967296", "-N 1e5", "-N 0100", "-N +5", "-b 512", "-b 8192", "-b 3000",
			"-i 512", "-i 67108865", "-I 100", "-I 8192", "-m 51", "-m 50.5", "-m 1.", "-m .5", "-m 1.125", "-m -1",
			"-E lazy_itable_init=2", "-E offset=4096", "-E stride", "-E stride=0", "-E discard=1", "-E ,", "-E lazy_itable_init=",
			"-E lazy_itable_init=0,lazy_itable_init=1", "-E root_owner=0", "-E root_owner=0:4294967295",
			"-O journal_dev", "-O has_journal,^has_journal", "-O casefold", "-O", "-N 100 -N 200", "-L data", "-U random",
			"-J device=/dev/sdb", "-F", "-q", "-N100", "-b=4096", "100", "-T largefile", "-E lazy_itable_init=0 -E nodiscard"},
		"xfs": {"-i size=100", "-i size=4096", "-i size=768", "-i 512", "-i size", "-m reflink=2", "-m crc=0,crc=1",
			"-m uuid=1", "-b size=131072", "-n ftype=0", "-f", "-l logdev=/dev/sdb", "-K -K", "-L x", "-d su=64k,sw=2"},
		"btrfs": {"-n 2048", "-n 131072", "-n 20000", "-m raid1", "-d raid0", "-f", "-L x", "-O quota", "--rootdir /"},
	}
	for fsType, list := range good {
		for _, s := range list {
			o, err := ParseMkfsOptions(fsType, s)
			if err != nil {
				t.Errorf("%s %q: %v", fsType, s, err)
				continue
			}
			if got := strings.Join(o.Args(), " "); got != strings.Join(strings.Fields(s), " ") {
				t.Errorf("%s %q: args %q", fsType, s, got)
			}
		}
	}
	for fsType, list := range bad {
		for _, s := range list {
			_, err := ParseMkfsOptions(fsType, s)
			if !errors.Is(err, volume.ErrInvalidArgument) {
				t.Errorf("%s %q accepted, or not INVALID_ARGUMENT: %v", fsType, s, err)
			}
		}
	}
	// Each filesystem's set is its own: ext4's -N is no xfs option.
	if _, err := ParseMkfsOptions("xfs", "-N 1000"); err == nil || !strings.Contains(err.Error(), "-b -i -m -n -K") {
		t.Errorf("ext4's -N for xfs: %v, want a refusal naming xfs's set", err)
	}
	if o, err := ParseMkfsOptions("", "-N 1000"); err != nil || o.fsType != "ext4" {
		t.Errorf(`"" is ext4: %+v, %v`, o, err)
	}
	if _, err := ParseMkfsOptions("ntfs", ""); !errors.Is(err, volume.ErrInvalidArgument) {
		t.Errorf("ntfs: %v", err)
	}
	if _, err := ParseMkfsOptions("ext4", strings.Repeat("-K ", 400)); err == nil || !strings.Contains(err.Error(), "longer") {
		t.Errorf("1200 bytes: %v", err)
	}
}

// The class's options come after mkfs's defaults and before the device;
// an ext4 class that sets -m replaces the default -m0.
func TestMkfsArgs(t *testing.T) {
	parse := func(fsType, s string) MkfsOptions {
		o, err := ParseMkfsOptions(fsType, s)
		must(t, err)
		return o
	}
	for _, tc := range []struct {
		fsType string
		opts   MkfsOptions
		want   string
	}{
		{"ext4", MkfsOptions{}, "-F -m0 /dev/x"},
		{"ext4", parse("ext4", "-N 1000 -E lazy_itable_init=0"), "-F -m0 -N 1000 -E lazy_itable_init=0 /dev/x"},
		{"ext4", parse("ext4", "-b 4096 -m 5"), "-F -b 4096 -m 5 /dev/x"},
		{"ext4", parse("ext4", "-O ^has_journal"), "-F -m0 -O ^has_journal /dev/x"},
		{"xfs", parse("xfs", "-i size=1024 -m reflink=0"), "-f -i size=1024 -m reflink=0 /dev/x"},
		{"btrfs", parse("btrfs", "-n 32768"), "-n 32768 /dev/x"},
	} {
		if got := strings.Join(mkfsArgs(tc.fsType, tc.opts, "/dev/x"), " "); got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.fsType, tc.opts.Args(), got, tc.want)
		}
	}
}

// FuzzParseMkfsOptions: accepted options are words of the vetted set of
// their filesystem, each flag at most once and followed by a value when it
// takes one, no value that reads as a flag, a path or a separator the tool
// would split on; they parse back to themselves from the text the volume
// context carries; anything refused is INVALID_ARGUMENT.
func FuzzParseMkfsOptions(f *testing.F) {
	for _, s := range []string{"-N 200000 -E lazy_itable_init=0", "-b 4096 -I 512 -O ^has_journal,metadata_csum", "-m 1.5",
		"-E root_owner=1000:1000,stride=8", "-N -N", "-E offset=1", "-N\t100", "-J device=/dev/sdb"} {
		f.Add("ext4", s)
	}
	for _, s := range []string{"-i size=1024 -m reflink=0,crc=1", "-K -b size=4096", "-m reflink=0 -m crc=1"} {
		f.Add("xfs", s)
	}
	f.Add("btrfs", "-n 32768 -m dup -d single -K")
	f.Add("", "-N 1000")
	f.Fuzz(func(t *testing.T, fsType, s string) {
		o, err := ParseMkfsOptions(fsType, s)
		if err != nil {
			if !errors.Is(err, volume.ErrInvalidArgument) {
				t.Fatalf("%q %q: %v is not INVALID_ARGUMENT", fsType, s, err)
			}
			return
		}
		args := o.Args()
		var flags []string
		for i := 0; i < len(args); i++ {
			f := vettedFlag(o.fsType, args[i])
			if f.flag == "" || slices.Contains(flags, f.flag) {
				t.Fatalf("%q %q: %q is no vetted flag, or a second one", fsType, s, args[i])
			}
			flags = append(flags, f.flag)
			if f.check == nil {
				continue
			}
			i++
			if i == len(args) {
				t.Fatalf("%q %q: %s without its value", fsType, s, f.flag)
			}
			v := args[i]
			if v == "" || strings.HasPrefix(v, "-") || strings.ContainsAny(v, "/ \t\n\"'\\$;") || strings.Trim(v, "abcdefghijklmnopqrstuvwxyz0123456789_=,:^.") != "" {
				t.Fatalf("%q %q: value %q accepted", fsType, s, v)
			}
		}
		back, err := ParseMkfsOptions(o.fsType, strings.Join(args, " "))
		if err != nil || !slices.Equal(back.Args(), args) || back.fsType != o.fsType {
			t.Fatalf("%q %q: %q does not parse back: %q, %v", fsType, s, args, back.Args(), err)
		}
	})
}
