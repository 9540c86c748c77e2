package crypt

import (
	"errors"
	"testing"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// FuzzMappingName: a volume's mapping name fits the kernel's limit, reads
// back to exactly its volume, and is never the device-mapper name of an LV
// itself (lvm2's "vg-lv"); names that are not valid lvm2 names are
// INVALID_ARGUMENT. And any device-mapper name VolumeOf takes is the
// mapping name of the volume it gives: no other name maps to a volume.
func FuzzMappingName(f *testing.F) {
	f.Add("vg0", "pvc-1", "vg0-pvc--1-crypt")
	f.Add("my-vg", "csi-0123", "vg0-pvc--1")
	f.Add("..", "lv", "vg-lv-crypt-crypt")
	f.Add("vg", "lv_tmeta", "vg-lv-real")
	f.Fuzz(func(t *testing.T, vg, lv, dm string) {
		name, err := MappingName(vg, lv)
		if err != nil {
			if !errors.Is(err, volume.ErrInvalidArgument) {
				t.Fatalf("MappingName(%q, %q): %v, want INVALID_ARGUMENT", vg, lv, err)
			}
		} else {
			if len(name) > 127 {
				t.Fatalf("MappingName(%q, %q) = %d bytes", vg, lv, len(name))
			}
			if gvg, glv, ok := VolumeOf(name); !ok || gvg != vg || glv != lv {
				t.Fatalf("VolumeOf(MappingName(%q, %q) = %q) = %q, %q, %t", vg, lv, name, gvg, glv, ok)
			}
			if _, _, layer, ok := lvm.SplitDMName(name); !ok || layer == "" {
				t.Fatalf("mapping name %q reads as an LV's own device", name)
			}
		}
		if gvg, glv, ok := VolumeOf(dm); ok {
			if back, err := MappingName(gvg, glv); err != nil || back != dm {
				t.Fatalf("VolumeOf(%q) = %q, %q, whose mapping is %q (%v)", dm, gvg, glv, back, err)
			}
		}
	})
}
