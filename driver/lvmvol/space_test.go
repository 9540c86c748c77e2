package lvmvol_test

import (
	"context"
	"fmt"
	"testing"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/test/lvmfake"
)

// Space tells each VG's health from the VG's own report: a missing PV
// degrades it until the PV is back; a VG lvm2 cannot read at all is
// reported unreadable, with no space, beside the others, not in place of
// them. Any other failure fails the reading.
func TestSpaceReportsVGHealth(t *testing.T) {
	f := lvmfake.New(100*mib, vg, "vg1")
	m := lvmvol.NewManager(lvmvol.Config{LVM: f, Wiper: f, Node: node, VolumeGroups: []string{vg, "vg1", "gone"}}) // "gone": lvm2 finds no such VG
	f.SetMissingPVs("vg1", 1)
	want := map[string]string{vg: "", "vg1": "Degraded MissingPhysicalVolume", "gone": "Inaccessible VolumeGroupUnreadable"}
	checkSpace(t, m, want)
	f.SetMissingPVs("vg1", 0)
	want["vg1"] = ""
	checkSpace(t, m, want)
	f.Fail = func(call string) error {
		if call == "GetVG" {
			return fmt.Errorf("vgs: %w", context.DeadlineExceeded)
		}
		return nil
	}
	if space, err := m.Space(ctx); err == nil {
		t.Errorf("Space with lvm2 timing out: %+v, want an error", space)
	}
}

// checkSpace reads Space and compares each VG's problems ("Kind Reason")
// with want; an unreadable VG must report no space.
func checkSpace(t *testing.T, m *lvmvol.Manager, want map[string]string) {
	t.Helper()
	space, err := m.Space(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(space) != len(want) {
		t.Fatalf("Space reported %d VGs, want %d: %+v", len(space), len(want), space)
	}
	for _, s := range space {
		got := ""
		for _, p := range s.Health {
			got += p.Kind.String() + " " + p.Reason
		}
		if got != want[s.Name] {
			t.Errorf("VG %s: health %q (%+v), want %q", s.Name, got, s.Health, want[s.Name])
		}
		if readable := s.Name != "gone"; readable != (s.Size > 0) {
			t.Errorf("VG %s: size %d", s.Name, s.Size)
		}
		if len(s.Health) > 0 && s.Health[0].Message == "" {
			t.Errorf("VG %s: a problem without a message: %+v", s.Name, s.Health)
		}
	}
}
