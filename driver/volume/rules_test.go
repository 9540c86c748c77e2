package volume_test

import (
	"errors"
	"testing"

	"carve.dev/carve/driver/volume"
)

func TestSettleSourceVG(t *testing.T) {
	src := &volume.ContentSource{Kind: volume.SourceSnapshot, ID: volume.ID{Node: "n", VG: "fast", LV: "snap-a"}}
	r := volume.CreateRequest{Name: "a", Source: src}
	if err := r.SettleSourceVG(); err != nil || r.VG != "fast" {
		t.Errorf("no VG asked: VG %q, %v; want the source's", r.VG, err)
	}
	r = volume.CreateRequest{Name: "a", VG: "fast", Source: src}
	if err := r.SettleSourceVG(); err != nil || r.VG != "fast" {
		t.Errorf("the source's VG asked: VG %q, %v", r.VG, err)
	}
	r = volume.CreateRequest{Name: "a", VG: "slow", Source: src}
	if err := r.SettleSourceVG(); !errors.Is(err, volume.ErrSourceMismatch) || r.VG != "slow" {
		t.Errorf("another VG asked: VG %q, %v; want ErrSourceMismatch", r.VG, err)
	}
	r = volume.CreateRequest{Name: "a"}
	if err := r.SettleSourceVG(); err != nil || r.VG != "" {
		t.Errorf("no source: VG %q, %v; want it left alone", r.VG, err)
	}
}

func TestCheckNoShrink(t *testing.T) {
	id := volume.ID{Node: "n", VG: "vg", LV: "a"}
	for _, tc := range []struct {
		size  uint64
		limit int64
		ok    bool
	}{{100, 0, true}, {100, 100, true}, {100, 200, true}, {100, 99, false}} {
		err := volume.CheckNoShrink(id, tc.size, tc.limit)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, volume.ErrOutOfRange)) {
			t.Errorf("size %d, limit %d: %v", tc.size, tc.limit, err)
		}
	}
}
