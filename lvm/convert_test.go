package lvm

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestConvertArgs(t *testing.T) {
	for _, tc := range []struct {
		mirrors int
		want    string
	}{
		{0, "lvconvert --yes -m 0 vg/lv"},
		{1, "lvconvert --yes --type raid1 -m 1 vg/lv"},
		{3, "lvconvert --yes --type raid1 -m 3 vg/lv"},
	} {
		args, err := convertArgs("vg", "lv", tc.mirrors)
		if err != nil || strings.Join(args, " ") != tc.want {
			t.Errorf("convertArgs(%d) = %q, %v; want %q", tc.mirrors, args, err, tc.want)
		}
	}
	for _, bad := range []int{-1, maxMirrors + 1} {
		if _, err := convertArgs("vg", "lv", bad); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("convertArgs(%d) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	if _, err := convertArgs("vg", "-lv", 1); !errors.Is(err, ErrInvalidName) {
		t.Errorf("convertArgs of a bad name = %v, want ErrInvalidName", err)
	}
}

// TestMirrors counts raid images as `lvs -a` reports them (lvm2's names,
// from the raid conversion run in the VM), not those of another LV whose
// name shares a prefix.
func TestMirrors(t *testing.T) {
	all := []LV{
		{Name: "a", Layout: "raid,raid1"},
		{Name: "a_rimage_0", Hidden: true}, {Name: "a_rimage_1", Hidden: true},
		{Name: "a_rmeta_0", Hidden: true}, {Name: "a_rmeta_1", Hidden: true},
		{Name: "ab", Layout: "raid,raid1"},
		{Name: "ab_rimage_0", Hidden: true}, {Name: "ab_rimage_1", Hidden: true}, {Name: "ab_rimage_2", Hidden: true},
		{Name: "lin", Layout: "linear"},
		{Name: "one", Layout: "raid,raid1"}, {Name: "one_rimage_0", Hidden: true},
	}
	for name, want := range map[string]int{"a": 1, "ab": 2, "lin": 0, "one": 0, "gone": 0} {
		if got := Mirrors(all, name); got != want {
			t.Errorf("Mirrors(%s) = %d, want %d", name, got, want)
		}
	}
}

func TestVisibleRAIDParts(t *testing.T) {
	all := []LV{
		{Name: "a", Layout: "raid,raid1"},
		{Name: "a_rimage_0"}, {Name: "a_rimage_1", Hidden: true},
		{Name: "a_rmeta_0"}, {Name: "a_rmeta_1"},
		{Name: "ab", Layout: "raid,raid1"}, {Name: "ab_rimage_0", Hidden: true}, {Name: "ab_rmeta_0", Hidden: true},
		{Name: "i", Layout: "raid,raid1"}, {Name: "i_rimage_0_imeta"}, {Name: "i_rimage_0_iorig", Hidden: true},
		{Name: "a_rmeta_x"}, {Name: "xa_rmeta_0"},
	}
	for name, want := range map[string]string{"a": "a_rimage_0 a_rmeta_0 a_rmeta_1", "ab": "", "i": "i_rimage_0_imeta", "gone": ""} {
		if got := strings.Join(VisibleRAIDParts(all, name), " "); got != want {
			t.Errorf("VisibleRAIDParts(%s) = %q, want %q", name, got, want)
		}
	}
}

// TestStrayRAIDParts: the legs a killed lvconvert left (visible, public,
// as lvm2 2.03.16 reports them) are stray; linked legs (private), hidden
// ones, a leg's integrity parts and other LVs' are not.
func TestStrayRAIDParts(t *testing.T) {
	all := []LV{
		{Name: "a", Layout: "linear", Role: "public"},
		{Name: "a_rimage_1", Role: "public"}, {Name: "a_rmeta_0", Role: "public"}, {Name: "a_rmeta_1", Role: "public"},
		{Name: "b", Layout: "raid,raid1", Role: "public"},
		{Name: "b_rimage_0", Role: "private,raid,image"}, {Name: "b_rmeta_0", Hidden: true, Role: "private,raid,metadata"},
		{Name: "b_rimage_2", Role: "public"}, {Name: "b_rimage_0_imeta", Role: "public"},
		{Name: "ab_rmeta_0", Role: "public"},
	}
	for name, want := range map[string]string{"a": "a_rimage_1 a_rmeta_0 a_rmeta_1", "b": "b_rimage_2", "ab": "ab_rmeta_0", "c": ""} {
		if got := strings.Join(StrayRAIDParts(all, name), " "); got != want {
			t.Errorf("StrayRAIDParts(%s) = %q, want %q", name, got, want)
		}
	}
}

func TestParseDevices(t *testing.T) {
	out := []byte(`{"report":[{"lv":[
		{"lv_name":"a", "devices":"a_rimage_0(0),a_rimage_1(0)"},
		{"lv_name":"[a_rimage_0]", "devices":"/dev/vda(0)"},
		{"lv_name":"[a_rimage_0]", "devices":"/dev/vdc(7)"},
		{"lv_name":"[a_rimage_1]", "devices":"/dev/vdb(1)"},
		{"lv_name":"[a_rmeta_0]", "devices":"/dev/vda(16)"},
		{"lv_name":"ab", "devices":"/dev/vdd(0)"},
		{"lv_name":"b", "devices":"/dev/vde(0)"}
	]}]}`)
	got, err := parseDevices(out, "a")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"/dev/vda", "/dev/vdb", "/dev/vdc"}; !slices.Equal(got, want) {
		t.Errorf("parseDevices = %v, want %v", got, want)
	}
	if _, err := parseDevices([]byte("{"), "a"); err == nil {
		t.Error("a broken report parsed")
	}
}

func TestConversionFit(t *testing.T) {
	const ext = 4 * mib
	pv := func(name string, free uint64) PV { return PV{Name: name, Free: free, Attr: "a--"} }
	leg := uint64(64*mib + ext) // a 64 MiB leg and its metadata extent
	for _, tc := range []struct {
		name       string
		have, want int
		pvs        []PV
		used       []string
		ok         bool
	}{
		{"down", 2, 0, nil, []string{"/dev/a"}, true},
		{"same", 1, 1, nil, []string{"/dev/a"}, true},
		{"up", 0, 1, []PV{pv("/dev/a", ext), pv("/dev/b", leg)}, []string{"/dev/a"}, true},
		{"only its own PV has room", 0, 1, []PV{pv("/dev/a", 10*leg), pv("/dev/b", leg-1)}, []string{"/dev/a"}, false},
		{"no room for its own metadata", 0, 1, []PV{pv("/dev/a", 0), pv("/dev/b", leg)}, []string{"/dev/a"}, false},
		{"raid1 grows a leg: its metadata exists", 1, 2, []PV{pv("/dev/a", 0), pv("/dev/b", 0), pv("/dev/c", leg)}, []string{"/dev/a", "/dev/b"}, true},
		{"two more legs, one PV", 0, 2, []PV{pv("/dev/a", ext), pv("/dev/b", 2*leg)}, []string{"/dev/a"}, false},
		{"not allocatable", 0, 1, []PV{pv("/dev/a", ext), {Name: "/dev/b", Free: leg, Attr: "---"}}, []string{"/dev/a"}, false},
		{"spans two PVs", 0, 1, []PV{pv("/dev/a", ext), pv("/dev/b", leg), pv("/dev/c", leg)}, []string{"/dev/a", "/dev/b"}, true},
	} {
		err := conversionFit("vg", "lv", 64*mib, ext, tc.have, tc.want, false, tc.pvs, tc.used)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrNoSpace)) {
			t.Errorf("%s: conversionFit = %v, want ok=%v (or ErrNoSpace)", tc.name, err, tc.ok)
		}
	}
}
