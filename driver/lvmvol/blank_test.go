package lvmvol_test

import (
	"slices"
	"testing"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/test/lvmfake"
)

// A raid1 volume with integrity is created inactive (lvm2's active create
// can hang in the kernel: lvmvol.newInactive) and blanked by Carve: its
// first 4 MiB and last MiB zeroed while active, then it is deactivated and
// settled; a retry after a crash before the settling blanks it again and
// settles it. A plain raid1 volume is blanked by lvcreate, not by Carve.
func TestIntegrityVolumeIsCreatedInactiveAndBlanked(t *testing.T) {
	m, f := newManager(t)
	f.SetPVCount(vg, 2)
	integrity := volume.CreateRequest{Name: "integ", VG: vg, RequiredBytes: 12 * mib, ParamsDigest: "p",
		Type: volume.Type{Mirrors: 1, Integrity: true}}
	v, err := m.CreateVolume(ctx, integrity)
	if err != nil {
		t.Fatal(err)
	}
	dev := "/dev/" + vg + "/" + volume.LVName("integ")
	want := []lvmfake.Range{{Device: dev, Offset: 0, Length: 4 * mib}, {Device: dev, Offset: 11 * mib, Length: mib}}
	if !slices.Equal(f.Zeroed, want) {
		t.Errorf("zeroed %v, want %v", f.Zeroed, want)
	}
	lv, _ := f.LV(vg, volume.LVName("integ"))
	if lv.Active || lv.HasTag("carve.dev/pending") || v.SizeBytes != 12*mib {
		t.Errorf("settled volume %+v: LV active %v, tags %v", v, lv.Active, lv.Tags)
	}
	if i, j := slices.Index(f.Calls, "CreateLV"), slices.Index(f.Calls, "Wipe"); i < 0 || j < i {
		t.Errorf("calls %v: want CreateLV, then the blanking", f.Calls)
	}

	// A crash left it created and not settled: the retry blanks it again
	// (it was never handed out) and settles it.
	f.Zeroed = nil
	pending := lv
	pending.Tags = append(slices.Clone(lv.Tags), "carve.dev/pending")
	f.Put(pending)
	if _, err := m.CreateVolume(ctx, integrity); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Zeroed, want) {
		t.Errorf("retry zeroed %v, want %v", f.Zeroed, want)
	}
	if lv, _ := f.LV(vg, volume.LVName("integ")); lv.Active || lv.HasTag("carve.dev/pending") {
		t.Errorf("after the retry: active %v, tags %v", lv.Active, lv.Tags)
	}

	f.Zeroed = nil
	if _, err := m.CreateVolume(ctx, volume.CreateRequest{Name: "plain", VG: vg, RequiredBytes: 8 * mib, ParamsDigest: "p",
		Type: volume.Type{Mirrors: 1}}); err != nil {
		t.Fatal(err)
	}
	if len(f.Zeroed) != 0 {
		t.Errorf("a plain raid1 volume was zeroed by Carve: %v (lvcreate blanks it)", f.Zeroed)
	}
}
