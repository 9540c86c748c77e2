package driver

import (
	"errors"
	"strings"
	"testing"

	"carve.dev/carve/driver/lvmvol"
)

// FuzzParseParams: any parameter map yields either parameters naming a
// served VG and a supported filesystem, or an INVALID_ARGUMENT error.
func FuzzParseParams(f *testing.F) {
	f.Add("volumeGroup", "vg0", "fsType", "ext4")
	f.Add("volumeGroup", "", "fsType", "")
	f.Add("csi.storage.k8s.io/pvc/name", "x", "fsType", "xfs")
	f.Add("bogus", "1", "fsType", "ntfs")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		p, err := parseParams(map[string]string{k1: v1, k2: v2}, []string{"vg0"})
		if err != nil {
			if !errors.Is(err, errInvalidArgument) {
				t.Fatalf("error %v is not INVALID_ARGUMENT", err)
			}
			return
		}
		if p.VG == "" || (p.FsType != "" && p.FsType != "ext4" && p.FsType != "xfs") {
			t.Fatalf("accepted %+v", p)
		}
	})
}

// FuzzParseID: an accepted ID has three non-empty parts that print back to
// the same string.
func FuzzParseID(f *testing.F) {
	f.Add("node/vg/lv")
	f.Add("fake-vol-id")
	f.Add("a//b")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := lvmvol.ParseID(s)
		if err != nil {
			if !errors.Is(err, lvmvol.ErrInvalidID) {
				t.Fatalf("error %v is not ErrInvalidID", err)
			}
			return
		}
		if id.String() != s || id.Node == "" || id.VG == "" || id.LV == "" || strings.Contains(id.LV, "/") {
			t.Fatalf("ParseID(%q) = %+v", s, id)
		}
	})
}
