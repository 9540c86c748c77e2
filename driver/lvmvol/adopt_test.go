package lvmvol_test

import (
	"errors"
	"testing"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

func id(lv string) volume.ID { return volume.ID{Node: node, VG: vg, LV: lv} }

// TestAdoptVolume: a settled volume of Carve's is adopted as it is; one
// half made is refused; an LV Carve did not make is imported only with
// its import tag, and only a plain linear LV nothing holds open; the
// import makes it Carve's and drops the tag; no LV is NOT_FOUND.
func TestAdoptVolume(t *testing.T) {
	m, f := newManager(t)
	made := mustCreate(t, m, "pvc-made", 8*mib)
	if v, err := m.AdoptVolume(ctx, made.ID); err != nil || v.ID != made.ID || v.SizeBytes != made.SizeBytes {
		t.Fatalf("adopt Carve's own: %+v, %v", v, err)
	}
	f.Put(lvm.LV{Name: "half", VGName: vg, Size: 4 * mib, Layout: "linear", Tags: []string{lvmvol.TagVolume, "carve.dev/pending"}})
	f.Put(lvm.LV{Name: "plain", VGName: vg, Size: 4 * mib, Layout: "linear"})
	f.Put(lvm.LV{Name: "tagged", VGName: vg, Size: 12 * mib, Layout: "linear", Tags: []string{lvmvol.TagImport, "mine"}})
	f.Put(lvm.LV{Name: "busy", VGName: vg, Size: 4 * mib, Layout: "linear", Open: true, Tags: []string{lvmvol.TagImport}})
	f.Put(lvm.LV{Name: "striped", VGName: vg, Size: 8 * mib, Layout: "striped", Tags: []string{lvmvol.TagImport}})
	f.Put(lvm.LV{Name: "inner", VGName: vg, Size: 4 * mib, Layout: "linear", Role: "private,thin,pool,data", Tags: []string{lvmvol.TagImport}})
	for name, want := range map[string]error{
		"half": volume.ErrFailedPrecondition, "plain": volume.ErrNotManaged, "busy": volume.ErrInUse,
		"striped": volume.ErrFailedPrecondition, "inner": volume.ErrFailedPrecondition, "nothing": volume.ErrVolumeNotFound,
	} {
		if _, err := m.AdoptVolume(ctx, id(name)); !errors.Is(err, want) {
			t.Errorf("adopt %s: %v, want %v", name, err, want)
		}
	}
	if l, _ := f.LV(vg, "plain"); len(l.Tags) != 0 {
		t.Errorf("a refused import changed the LV's tags: %v", l.Tags)
	}
	v, err := m.AdoptVolume(ctx, id("tagged"))
	if err != nil || v.SizeBytes != 12*mib {
		t.Fatalf("import of a tagged LV: %+v, %v", v, err)
	}
	l, _ := f.LV(vg, "tagged")
	if !l.HasTag(lvmvol.TagVolume) || l.HasTag(lvmvol.TagImport) || !l.HasTag("mine") {
		t.Errorf("imported LV's tags %v: want Carve's, the import tag gone, the administrator's kept", l.Tags)
	}
	// Imported, it is a volume like any: read back, and adopted again.
	if again, err := m.AdoptVolume(ctx, id("tagged")); err != nil || again.ID != v.ID {
		t.Errorf("adopt the imported volume again: %+v, %v", again, err)
	}
	if _, err := m.CreateVolume(ctx, req("tagged", 12*mib)); !errors.Is(err, volume.ErrNameConflict) {
		t.Errorf("a create of the imported volume's name: %v, want a name conflict", err)
	}
}
