package csi

import (
	"errors"
	"testing"

	"carve.dev/carve/driver/volume"
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
			if !errors.Is(err, volume.ErrInvalidArgument) {
				t.Fatalf("error %v is not INVALID_ARGUMENT", err)
			}
			return
		}
		if p.VG == "" || (p.FsType != "" && p.FsType != "ext4" && p.FsType != "xfs") {
			t.Fatalf("accepted %+v", p)
		}
	})
}
