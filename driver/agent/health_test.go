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
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// A VG that loses a PV shows it in the NodeStorage (MissingPhysicalVolume,
// Degraded) with a Warning, once; when the PV is back the problem clears,
// with a Normal event. Reports in between write nothing.
func TestNodeStorageShowsAVGsMissingPV(t *testing.T) {
	r := newRig(t)
	f := lvmfake.New(100*mib, "vg0", "vg1")
	vols := lvmvol.NewManager(lvmvol.Config{LVM: f, Wiper: f, Node: node, VolumeGroups: []string{"vg0", "vg1"}})
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
	vols := lvmvol.NewManager(lvmvol.Config{LVM: f, Wiper: f, Node: node, VolumeGroups: []string{"vg0", "vg1"}})
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
	vols := lvmvol.NewManager(lvmvol.Config{LVM: whole, Wiper: whole, Node: node, VolumeGroups: []string{"vg0", "vg1"}})
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
	rep.Space = lvmvol.NewManager(lvmvol.Config{LVM: broken, Wiper: broken, Node: node, VolumeGroups: []string{"vg0", "vg1"}}).Space
	rep.Volumes = func(context.Context, lvm.Reads) ([]volume.Volume, error) {
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

// A thin pool that fills up after its volume's last reconcile shows in the
// volume's LogicalVolume at the next report (ThinPoolFull, a Warning on
// it), and clears when the pool has room again (a Normal event). Reports
// that find nothing new write nothing, and a reconcile keeps the health.
func TestLogicalVolumeHealthFollowsItsThinPool(t *testing.T) {
	r := thinVolumeRig(t)
	rec := events.NewFakeRecorder(10)
	r.r.Events = rec
	vols := lvmvol.NewManager(lvmvol.Config{LVM: r.lvm, Wiper: r.lvm, Node: node, VolumeGroups: []string{"vg0"}})
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Volumes: vols.ListVolumes, Events: rec}
	report := func() *v1alpha1.LogicalVolume { reportedOn(t, r, rep); return logicalVolume(t, r, "pvc-thin") }
	idle := logicalVolume(t, r, "pvc-thin").ResourceVersion
	if lv := report(); lv.ResourceVersion != idle || len(lv.Status.Health) != 0 {
		t.Errorf("idle report: health %+v, resourceVersion %s -> %s; want nothing written", lv.Status.Health, idle, lv.ResourceVersion)
	}
	r.lvm.SetPoolUsage("vg0", "pool", 100, 10, 0)
	full := report()
	lvHealthIs(t, full, "Inaccessible ThinPoolFull")
	wantEvents(t, rec, "Warning ThinPoolFull thin pool vg0/pool is out of data space")
	if lv := report(); lv.ResourceVersion != full.ResourceVersion {
		t.Errorf("a report that found nothing new wrote the LogicalVolume: %s -> %s", full.ResourceVersion, lv.ResourceVersion)
	}
	if lv, err := r.reconcile("pvc-thin"); err != nil || !sameProblems(lv.Status.Health, full.Status.Health) {
		t.Errorf("a reconcile changed the health: %+v, %v", lv.Status.Health, err)
	}
	wantEvents(t, rec) // told once, by whoever saw it first
	r.lvm.SetPoolUsage("vg0", "pool", 50, 10, 0)
	lvHealthIs(t, report(), "")
	wantEvents(t, rec, "Normal ThinPoolFull cleared")
}

// A reconcile that finds the same problems keeps the status's messages,
// though their figures moved: a status write for each would wake a
// reconcile for each while a pool fills.
func TestReconcileKeepsTheSameProblems(t *testing.T) {
	r := thinVolumeRig(t)
	r.lvm.SetPoolUsage("vg0", "pool", 91, 10, 0)
	first, err := r.reconcile("pvc-thin")
	if err != nil {
		t.Fatal(err)
	}
	lvHealthIs(t, first, "Degraded ThinPoolNearlyFull")
	r.lvm.SetPoolUsage("vg0", "pool", 95, 10, 0)
	lv, err := r.reconcile("pvc-thin")
	if err != nil || lv.ResourceVersion != first.ResourceVersion || lv.Status.Health[0].Message != first.Status.Health[0].Message {
		t.Errorf("after the pool filled on: health %+v, resourceVersion %s -> %s, %v; want the first unchanged",
			lv.Status.Health, first.ResourceVersion, lv.ResourceVersion, err)
	}
}

// A difference seen in the cached listing is confirmed on a fresh one
// before anything is written: a cached report older than the status (a
// reconcile reads afresh) must not undo it.
func TestCachedHealthIsConfirmedAfresh(t *testing.T) {
	r := newRig(t, lvResource("pvc-1", node, 8*mib))
	if _, err := r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	vols := lvmvol.NewManager(lvmvol.Config{LVM: r.lvm, Wiper: r.lvm, Node: node, VolumeGroups: []string{"vg0"}})
	stale, err := vols.ListVolumes(ctx, lvm.Fresh)
	if err != nil {
		t.Fatal(err)
	}
	stale[0].Health = []volume.Problem{{Kind: volume.Inaccessible, Reason: "ThinPoolFull", Message: "stale"}}
	fresh := 0
	list := func(c context.Context, reads lvm.Reads) ([]volume.Volume, error) {
		if reads.IsCached() {
			return stale, nil
		}
		fresh++
		return vols.ListVolumes(c, reads)
	}
	rec := events.NewFakeRecorder(10)
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Volumes: list, Events: rec}
	before := logicalVolume(t, r, "pvc-1").ResourceVersion
	reportedOn(t, r, rep)
	if lv := logicalVolume(t, r, "pvc-1"); lv.ResourceVersion != before || len(lv.Status.Health) != 0 || fresh != 1 {
		t.Errorf("health %+v (resourceVersion %s -> %s) after %d fresh reads; want it untouched after 1",
			lv.Status.Health, before, lv.ResourceVersion, fresh)
	}
	wantEvents(t, rec)
}

func nodeStorage(t *testing.T, r *rig) v1alpha1.NodeStorage {
	t.Helper()
	var ns v1alpha1.NodeStorage
	if err := r.c.Get(ctx, types.NamespacedName{Name: node}, &ns); err != nil {
		t.Fatal(err)
	}
	return ns
}

func logicalVolume(t *testing.T, r *rig, name string) *v1alpha1.LogicalVolume {
	t.Helper()
	var lv v1alpha1.LogicalVolume
	if err := r.c.Get(ctx, types.NamespacedName{Name: name}, &lv); err != nil {
		t.Fatal(err)
	}
	return &lv
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

func lvHealthIs(t *testing.T, lv *v1alpha1.LogicalVolume, want string) {
	t.Helper()
	if got := problems(lv.Status.Health); got != want {
		t.Errorf("LogicalVolume %s: health %q (%+v), want %q", lv.Name, got, lv.Status.Health, want)
	}
}

// thinVolumeRig is a rig whose LogicalVolume pvc-thin is carved, as a thin
// volume in vg0's 40 MiB pool.
func thinVolumeRig(t *testing.T) *rig {
	t.Helper()
	v := lvResource("pvc-thin", node, 8*mib)
	v.Spec.Type.ThinPool = "pool"
	r := newRig(t, v)
	r.lvm.PutThinPool("vg0", "pool", 40*mib, 0)
	if _, err := r.reconcile("pvc-thin"); err != nil {
		t.Fatal(err)
	}
	return r
}
