package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/test/lvmfake"
)

// A VG that loses a PV shows it in the NodeStorage (MissingPhysicalVolume,
// Degraded) with a Warning, once; when the PV is back the problem clears,
// with a Normal event. Reports in between write nothing.
func TestNodeStorageShowsAVGsMissingPV(t *testing.T) {
	r := newRig(t)
	f := lvmfake.New(100*mib, "vg0", "vg1")
	vols := lvmvol.NewManager(f, f, node, []string{"vg0", "vg1"})
	rec := events.NewFakeRecorder(10)
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Volumes: vols.ListVolumes,
		Events: rec, Heartbeat: time.Hour}
	want := map[string]string{"vg0": "", "vg1": ""}
	vgHealthIs(t, reportedOn(t, r, rep), want)
	f.SetMissingPVs("vg1", 1)
	want["vg1"] = "Degraded MissingPhysicalVolume"
	ns := reportedOn(t, r, rep)
	vgHealthIs(t, ns, want)
	wantEvents(t, rec, "Warning MissingPhysicalVolume volume group vg1 misses 1 physical volume(s)")
	if again := reportedOn(t, r, rep); again.ResourceVersion != ns.ResourceVersion {
		t.Errorf("an unchanged report was written: resourceVersion %s -> %s", ns.ResourceVersion, again.ResourceVersion)
	}
	wantEvents(t, rec) // told once
	f.SetMissingPVs("vg1", 0)
	want["vg1"] = ""
	vgHealthIs(t, reportedOn(t, r, rep), want)
	wantEvents(t, rec, "Normal MissingPhysicalVolume cleared (was: volume group vg1 misses 1 physical volume(s))")
}

// Two VGs that lose a PV at once are two events on the API server, each
// with its own note: each regards its VG's entry in the NodeStorage (a
// field path), or the recorder would fold the second into the first's
// series and lose its note (see TestEachOrphanIsAnEventOfItsOwn).
func TestEachVGProblemIsAnEventOfItsOwn(t *testing.T) {
	r := newRig(t)
	f := lvmfake.New(100*mib, "vg0", "vg1")
	f.SetMissingPVs("vg0", 1)
	f.SetMissingPVs("vg1", 2)
	rec, list := apiEvents(t, r)
	vols := lvmvol.NewManager(f, f, node, []string{"vg0", "vg1"})
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Events: rec}
	if err := rep.Report(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range list("MissingPhysicalVolume", 2) {
		got[e.Regarding.FieldPath] = e.Note
	}
	want := map[string]string{"status.volumeGroups{vg0}": "volume group vg0 misses 1 physical volume(s)",
		"status.volumeGroups{vg1}": "volume group vg1 misses 2 physical volume(s)"}
	if !maps.Equal(got, want) {
		t.Errorf("events by field path %q, want %q", got, want)
	}
}

// A VG lvm2 cannot read at all is reported beside the others, with no
// space and VolumeGroupUnreadable (Inaccessible); the audit, which cannot
// list its volumes, fails and leaves its last findings standing. When the
// disks are back, the problem clears.
func TestNodeStorageShowsAnUnreadableVG(t *testing.T) {
	r := newRig(t)
	whole := lvmfake.New(100*mib, "vg0", "vg1")
	vols := lvmvol.NewManager(whole, whole, node, []string{"vg0", "vg1"})
	if _, err := vols.CreateVolume(ctx, volume.CreateRequest{Name: "pvc-orphan", Node: node, VG: "vg0",
		RequiredBytes: 5 * mib, ParamsDigest: "d"}); err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(10)
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Volumes: vols.ListVolumes, Events: rec}
	reportedOn(t, r, rep)
	if ns := reportedOn(t, r, rep); !slices.Equal(ns.Status.OrphanedVolumes, []string{"vg0/pvc-orphan"}) {
		t.Fatalf("orphans %v, want [vg0/pvc-orphan]", ns.Status.OrphanedVolumes)
	}
	drain(rec)
	// vg1's disks are gone: lvm2 finds no such VG, and lists no volumes.
	broken := lvmfake.New(100*mib, "vg0")
	rep.Space = lvmvol.NewManager(broken, broken, node, []string{"vg0", "vg1"}).Space
	rep.Volumes = func(context.Context) ([]volume.Volume, error) {
		return nil, fmt.Errorf("list volumes in vg1: %w", volume.ErrVGUnreadable)
	}
	if err := rep.Report(ctx); err == nil || !strings.Contains(err.Error(), "audit") {
		t.Errorf("report with a VG unreadable: %v, want the audit's failure", err)
	}
	ns := nodeStorage(t, r)
	vgHealthIs(t, ns, map[string]string{"vg0": "", "vg1": "Inaccessible VolumeGroupUnreadable"})
	if vg1 := ns.Status.VolumeGroups[1]; vg1.SizeBytes != 0 || vg1.FreeBytes != 0 {
		t.Errorf("unreadable vg1 reports space: %+v", vg1)
	}
	if !slices.Equal(ns.Status.OrphanedVolumes, []string{"vg0/pvc-orphan"}) {
		t.Errorf("a failed audit changed the orphans: %v", ns.Status.OrphanedVolumes)
	}
	wantEvents(t, rec, "Warning VolumeGroupUnreadable volume group vg1 cannot be read")
	rep.Space, rep.Volumes = vols.Space, vols.ListVolumes
	vgHealthIs(t, reportedOn(t, r, rep), map[string]string{"vg0": "", "vg1": ""})
	wantEvents(t, rec, "Normal VolumeGroupUnreadable cleared")
}

func nodeStorage(t *testing.T, r *rig) v1alpha1.NodeStorage {
	t.Helper()
	var ns v1alpha1.NodeStorage
	if err := r.c.Get(ctx, types.NamespacedName{Name: node}, &ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

// problems renders health as "Kind Reason", comma-separated.
func problems(hs []v1alpha1.HealthProblem) string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Kind+" "+h.Reason)
	}
	return strings.Join(out, ", ")
}

func vgHealthIs(t *testing.T, ns v1alpha1.NodeStorage, want map[string]string) {
	t.Helper()
	if len(ns.Status.VolumeGroups) != len(want) {
		t.Fatalf("VGs %+v, want %d", ns.Status.VolumeGroups, len(want))
	}
	for _, vg := range ns.Status.VolumeGroups {
		if got := problems(vg.Health); got != want[vg.Name] {
			t.Errorf("VG %s: health %q (%+v), want %q", vg.Name, got, vg.Health, want[vg.Name])
		}
	}
}
