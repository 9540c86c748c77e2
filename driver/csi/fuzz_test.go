package csi

import (
	"errors"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

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

// FuzzSizeRange: any capacity range is refused as INVALID_ARGUMENT only
// when it is negative or upside down; an accepted one gives a positive
// size within the asked range, raised to the filesystem's minimum only
// where the limit leaves room for it.
func FuzzSizeRange(f *testing.F) {
	f.Add(int64(0), int64(0), "")
	f.Add(int64(10<<20), int64(0), "xfs")
	f.Add(int64(10<<20), int64(200<<20), "xfs")
	f.Add(int64(-1), int64(5), "ext4")
	f.Add(int64(7), int64(3), "btrfs")
	f.Add(int64(0), int64(1), "zfs")
	f.Fuzz(func(t *testing.T, req, lim int64, fs string) {
		required, limit, err := sizeRange(&csi.CapacityRange{RequiredBytes: req, LimitBytes: lim}, fs)
		bad := req < 0 || lim < 0 || (lim > 0 && req > lim)
		if err != nil {
			if !bad || !errors.Is(err, volume.ErrInvalidArgument) {
				t.Fatalf("[%d, %d] %q refused: %v", req, lim, fs, err)
			}
			return
		}
		switch {
		case bad:
			t.Fatalf("[%d, %d] accepted as %d, %d", req, lim, required, limit)
		case limit != lim:
			t.Fatalf("[%d, %d]: limit changed to %d", req, lim, limit)
		case required <= 0 || required < req:
			t.Fatalf("[%d, %d] %q: size %d", req, lim, fs, required)
		case limit > 0 && required > limit:
			t.Fatalf("[%d, %d] %q: size %d above the limit", req, lim, fs, required)
		case (limit == 0 || limit >= volume.MinSize(fs)) && required < volume.MinSize(fs):
			t.Fatalf("[%d, %d] %q: size %d under the filesystem's minimum", req, lim, fs, required)
		}
	})
}
