package lvmvol_test

import (
	"errors"
	"testing"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/test/lvmfake"
)

// twoVGs is a manager serving vg0 and vg1 (tagged fast), 100 MiB each,
// on a fake LVM; a VG named in neither stays unserved.
func twoVGs(t *testing.T) (*lvmvol.Manager, *lvmfake.LVM) {
	t.Helper()
	f := lvmfake.New(100*mib, "vg0", "vg1", "unserved")
	f.SetVGTags("vg1", "fast")
	f.SetVGTags("unserved", "fast")
	return lvmvol.NewManager(lvmvol.Config{LVM: f, Wiper: f, Copier: f, Node: node, VolumeGroups: []string{"vg0", "vg1"}}), f
}

func choiceReq(name string, size int64, c volume.VGChoice) volume.CreateRequest {
	return volume.CreateRequest{Name: name, VGs: &c, RequiredBytes: size, ParamsDigest: "p1"}
}

// TestCreateInSeveralVGs: a class's several VGs resolve to one per
// volume by its policy, a retry finds the volume where it went though
// the policy would now pick elsewhere, a tag names only the served VGs
// carrying it, and capacity adds them up.
func TestCreateInSeveralVGs(t *testing.T) {
	m, _ := twoVGs(t)
	both := volume.VGChoice{Names: []string{"vg0", "vg1"}}
	if _, err := m.CreateVolume(ctx, volume.CreateRequest{Name: "ballast", VG: "vg0", RequiredBytes: 40 * mib, ParamsDigest: "p1"}); err != nil {
		t.Fatal(err)
	}
	spread, err := m.CreateVolume(ctx, choiceReq("spread", 8*mib, both))
	if err != nil || spread.ID.VG != "vg1" {
		t.Fatalf("spread: %+v, %v; want vg1", spread.ID, err)
	}
	pack := both
	pack.Policy = volume.Pack
	if v, err := m.CreateVolume(ctx, choiceReq("pack", 8*mib, pack)); err != nil || v.ID.VG != "vg0" {
		t.Fatalf("pack: %+v, %v; want vg0", v.ID, err)
	}
	// vg1 now has less room than vg0; the retry still finds vg1's.
	if _, err := m.CreateVolume(ctx, volume.CreateRequest{Name: "ballast1", VG: "vg1", RequiredBytes: 80 * mib, ParamsDigest: "p1"}); err != nil {
		t.Fatal(err)
	}
	if again, err := m.CreateVolume(ctx, choiceReq("spread", 8*mib, both)); err != nil || again.ID != spread.ID {
		t.Fatalf("retry: %+v, %v; want %+v", again.ID, err, spread.ID)
	}
	if v, err := m.CreateVolume(ctx, choiceReq("spread-2", 8*mib, both)); err != nil || v.ID.VG != "vg0" {
		t.Fatalf("spread after vg1 filled: %+v, %v; want vg0", v.ID, err)
	}
	// The tag: vg1 only, never the unserved VG that carries it too.
	if v, err := m.CreateVolume(ctx, choiceReq("tagged", 4*mib, volume.VGChoice{Tag: "fast"})); err != nil || v.ID.VG != "vg1" {
		t.Fatalf("@fast: %+v, %v; want vg1", v.ID, err)
	}
	all, err := m.Capacity(ctx, node, both, volume.Type{})
	if err != nil {
		t.Fatal(err)
	}
	one, _ := m.Capacity(ctx, node, volume.OneVG("vg0"), volume.Type{})
	other, _ := m.Capacity(ctx, node, volume.OneVG("vg1"), volume.Type{})
	if all.AvailableBytes != one.AvailableBytes+other.AvailableBytes || all.MaximumVolumeBytes != max(one.MaximumVolumeBytes, other.MaximumVolumeBytes) {
		t.Errorf("capacity of both %+v; alone %+v and %+v", all, one, other)
	}
	_, err = m.CreateVolume(ctx, choiceReq("huge", all.MaximumVolumeBytes+8*mib, both))
	if !errors.Is(err, volume.ErrResourceExhausted) {
		t.Errorf("too large for either VG: %v, want RESOURCE_EXHAUSTED", err)
	}
	if _, err := m.CreateVolume(ctx, choiceReq("nowhere", mib, volume.VGChoice{Names: []string{"unserved"}})); !errors.Is(err, volume.ErrResourceExhausted) {
		t.Errorf("no served VG in the choice: %v, want RESOURCE_EXHAUSTED", err)
	}
}

// TestCloneInSeveralVGs: a clone goes in its source's VG when the
// choice names it, and is refused when it does not.
func TestCloneInSeveralVGs(t *testing.T) {
	m, _ := twoVGs(t)
	src, err := m.CreateVolume(ctx, volume.CreateRequest{Name: "src", VG: "vg1", RequiredBytes: 8 * mib, ParamsDigest: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	clone := choiceReq("clone", 8*mib, volume.VGChoice{Names: []string{"vg0", "vg1"}, Policy: volume.Pack})
	clone.Source = &volume.ContentSource{Kind: volume.SourceVolume, ID: src.ID}
	if v, err := m.CreateVolume(ctx, clone); err != nil || v.ID.VG != "vg1" {
		t.Fatalf("clone: %+v, %v; want vg1", v.ID, err)
	}
	clone = choiceReq("clone-2", 8*mib, volume.VGChoice{Names: []string{"vg0"}, Policy: volume.Pack})
	clone.Source = &volume.ContentSource{Kind: volume.SourceVolume, ID: src.ID}
	if _, err := m.CreateVolume(ctx, clone); !errors.Is(err, volume.ErrSourceMismatch) {
		t.Fatalf("clone outside the choice: %v, want ErrSourceMismatch", err)
	}
}
