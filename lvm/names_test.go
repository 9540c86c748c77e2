package lvm

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateLVName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"vol1", true},
		{"pvc-0a1b2c3d-4e5f", true},
		{"a.b+c_d-e", true},
		{"_leading_underscore", true},
		{".hidden", true},
		{"+plus", true},
		{"x_tpool", true}, // _tpool is not reserved (lvm2 accepted it)
		{"mysnapshot", true},
		{strings.Repeat("a", 127), true},
		{"", false},
		{strings.Repeat("a", 128), false},
		{".", false},
		{"..", false},
		{"-dash", false},
		{"a b", false},
		{"a/b", false},
		{"a:b", false},
		{"ä", false},
		{"a\x00b", false},
		{"snapshot", false},
		{"snapshot1", false},
		{"pvmove", false},
		{"pvmove0", false},
		{"x_tmeta", false},
		{"x_tdata_y", false},
		{"lvol0_pmspare", false},
		{"m_rimage_0", false},
		{"m_rmeta_0", false},
		{"m_mimage_1", false},
		{"m_mlog", false},
		{"c_cdata", false},
		{"c_cmeta", false},
		{"c_corig", false},
		{"c_cpool", false},
		{"c_cvol", false},
		{"i_imeta", false},
		{"i_iorig", false},
		{"v_vdata", false},
		{"v_vorigin", false},
		{"w_wcorig", false},
	} {
		err := ValidateLVName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateLVName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateLVName(%q) = %v, does not wrap ErrInvalidName", tc.name, err)
		}
	}
}

func TestValidateVGName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"vg0", true},
		{"carve-vg.1+x_y", true},
		{"snapshot", true}, // LV-only reservations do not apply to VGs
		{"a_tmeta", true},
		{strings.Repeat("v", 127), true},
		{"", false},
		{strings.Repeat("v", 128), false},
		{".", false},
		{"..", false},
		{"-vg", false},
		{"vg/0", false},
		{"vg 0", false},
	} {
		err := ValidateVGName(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateVGName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateVGName(%q) = %v, does not wrap ErrInvalidName", tc.name, err)
		}
	}
}

func TestValidateVGLVLength(t *testing.T) {
	// Measured: lvm2 2.03.16 accepts vg "vgh" (3) with a 121-character LV
	// and refuses 122.
	if err := validateVGLV("vgh", strings.Repeat("c", 121)); err != nil {
		t.Errorf("121: %v", err)
	}
	if err := validateVGLV("vgh", strings.Repeat("c", 122)); !errors.Is(err, ErrInvalidName) {
		t.Errorf("122: %v, want ErrInvalidName", err)
	}
}

func TestValidateTag(t *testing.T) {
	for _, tc := range []struct {
		tag string
		ok  bool
	}{
		{"t1", true},
		{"carve.dev/volume=pvc-1", true},
		{"a/b=c!:&#", true},
		{"A_Z+0.9-x", true},
		{strings.Repeat("t", 1024), true},
		{"", false},
		{strings.Repeat("t", 1025), false},
		{"-leading", false},
		{"a b", false},
		{"a@b", false},
		{"a,b", false}, // commas separate tags in reports
		{"a\"b", false},
		{"é", false},
	} {
		err := ValidateTag(tc.tag)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateTag(%q) = %v, want ok=%v", tc.tag, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateTag(%q) = %v, does not wrap ErrInvalidName", tc.tag, err)
		}
	}
}

// FuzzValidateName checks that validation never panics and that whatever it
// accepts only uses lvm2's characters: names a-z A-Z 0-9 + _ . -, tags
// also / = ! : & # (lvs lists tags comma-separated, so no comma), never a
// leading '-'; a valid LV name is a valid VG name and a valid tag.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"vol1", "", ".", "..", "-x", "snapshot", "a_tmeta", "a/b=c!:&#", "ä", strings.Repeat("a", 130)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lvErr, vgErr, tagErr := ValidateLVName(s), ValidateVGName(s), ValidateTag(s)
		for _, err := range []error{lvErr, vgErr, tagErr} {
			if err != nil && !errors.Is(err, ErrInvalidName) {
				t.Fatalf("%q: %v does not wrap ErrInvalidName", s, err)
			}
		}
		if lvErr == nil && vgErr != nil {
			t.Fatalf("%q: valid LV name but invalid VG name: %v", s, vgErr)
		}
		if vgErr == nil && tagErr != nil {
			t.Fatalf("%q: valid VG name but invalid tag: %v", s, tagErr)
		}
		if tagErr == nil {
			if s == "" || len(s) > maxTagLen || s[0] == '-' || strings.ContainsAny(s, " ,@\"\\\n") ||
				strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+.-/=!:&#") != "" {
				t.Fatalf("%q accepted as a tag", s)
			}
		}
	})
}

func TestSplitDMName(t *testing.T) {
	for dm, want := range map[string][3]string{
		"vg0-pvc--1":            {"vg0", "pvc-1", ""},
		"carve--linear-vol1":    {"carve-linear", "vol1", ""},
		"a---b":                 {"a-", "b", ""},
		"vg-pool-tpool":         {"vg", "pool", "tpool"},
		"nodesafe-canary":       {"nodesafe", "canary", ""},
		"vg-csi--0123abcd--x.y": {"vg", "csi-0123abcd-x.y", ""},
	} {
		vg, lv, layer, ok := SplitDMName(dm)
		if !ok || [3]string{vg, lv, layer} != want {
			t.Errorf("SplitDMName(%q) = %q %q %q %t, want %q", dm, vg, lv, layer, ok, want)
		}
	}
	for _, bad := range []string{"", "novg", "vg-", "-lv", "vg-a-b-c", "vg-pool_tdata", "vg-x y", "loop0", "vg-lv-"} {
		if vg, lv, layer, ok := SplitDMName(bad); ok {
			t.Errorf("SplitDMName(%q) = %q %q %q, want not ok", bad, vg, lv, layer)
		}
	}
}

// FuzzSplitDMName: the node reads a mount's VG and LV back from its
// device-mapper name. Every valid VG and LV name (and a layer such as
// "tpool") is read back exactly from the name lvm2 makes of it, and a
// name that is accepted is the one lvm2 makes of what it was split into,
// with valid VG and LV names and no empty layer ("vg-lv-" is no device of
// lvm2's, and was once read as vg/lv itself).
func FuzzSplitDMName(f *testing.F) {
	for _, s := range []string{"vg0-pvc--1", "carve--linear-vol1", "a---b", "vg-pool-tpool", "vg-x y", "", "-", "--", "vg-",
		"vg--", "vg-lv-", "vg-a-b-c", "vg-pool_tdata", "vg-snapshot1", "../x-y", "vg-lv\x00", "vg-ä"} {
		f.Add(s, "vg0", "lv", "")
	}
	f.Add("", "carve-linear", "pvc-1-", "tpool")
	f.Add("", "-vg", "lv", "")
	f.Fuzz(func(t *testing.T, dm, vg, lv, layer string) {
		if v, l, y, ok := SplitDMName(dm); ok {
			if ValidateVGName(v) != nil || ValidateLVName(l) != nil {
				t.Fatalf("%q split into invalid names %q %q", dm, v, l)
			}
			if back := dmName(v, l, y); back != dm {
				t.Fatalf("%q split into %q %q %q, which lvm2 names %q", dm, v, l, y, back)
			}
		}
		if ValidateVGName(vg) != nil || ValidateLVName(lv) != nil || (layer != "" && ValidateVGName(layer) != nil) {
			return // lvm2's layers are words: "tpool", "real", "cow"
		}
		v, l, y, ok := SplitDMName(dmName(vg, lv, layer))
		if !ok || v != vg || l != lv || y != layer {
			t.Fatalf("%q %q %q named %q, read back as %q %q %q %t", vg, lv, layer, dmName(vg, lv, layer), v, l, y, ok)
		}
	})
}
