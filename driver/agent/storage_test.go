package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// An LV of Carve's that no LogicalVolume claims is reported as orphaned,
// but only from the second report that sees it, and never removed.
func TestOrphanedVolumesAreReportedNotRemoved(t *testing.T) {
	r := newRig(t, lvResource("pvc-claimed", node, 5*mib))
	if _, err := r.reconcile("pvc-claimed"); err != nil {
		t.Fatal(err)
	}
	vols := lvmvol.NewManager(lvmvol.Config{LVM: r.lvm, Wiper: r.lvm, Node: node, VolumeGroups: []string{"vg0"}})
	if _, err := vols.CreateVolume(ctx, volume.CreateRequest{Name: "pvc-orphan", Node: node, VG: "vg0",
		RequiredBytes: 5 * mib, ParamsDigest: "d"}); err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(10)
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Volumes: vols.ListVolumes, Events: rec}
	report := func() []string { return reportedOn(t, r, rep).Status.OrphanedVolumes }
	if got := report(); len(got) != 0 {
		t.Errorf("first report: orphans %v, want none until seen twice", got)
	}
	if got := report(); !slices.Equal(got, []string{"vg0/pvc-orphan"}) {
		t.Errorf("second report: orphans %v, want [vg0/pvc-orphan]", got)
	}
	wantEvents(t, rec, "Warning OrphanedVolume LV vg0/pvc-orphan")
	if got := report(); !slices.Equal(got, []string{"vg0/pvc-orphan"}) {
		t.Errorf("third report: orphans %v, want [vg0/pvc-orphan]", got)
	}
	wantEvents(t, rec) // told once, not at every report
	list, err := vols.ListVolumes(ctx, lvm.Fresh)
	if err != nil || len(list) != 2 {
		t.Errorf("volumes after the reports: %v, %v (the orphan must stay)", list, err)
	}
}

// A report that changed nothing is not written; a change, or the
// heartbeat, is.
func TestIdleReportsWriteNothing(t *testing.T) {
	r := newRig(t)
	vols := lvmvol.NewManager(lvmvol.Config{LVM: r.lvm, Wiper: r.lvm, Node: node, VolumeGroups: []string{"vg0"}})
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Volumes: vols.ListVolumes,
		Heartbeat: time.Hour}
	version := func() string { return reportedOn(t, r, rep).ResourceVersion }
	first := version()
	if again := version(); again != first {
		t.Errorf("an unchanged report was written: resourceVersion %s -> %s", first, again)
	}
	if _, err := vols.CreateVolume(ctx, volume.CreateRequest{Name: "pvc-new", Node: node, VG: "vg0",
		RequiredBytes: 5 * mib, ParamsDigest: "d"}); err != nil {
		t.Fatal(err)
	}
	changed := version()
	if changed == first {
		t.Error("a report whose free space changed was not written")
	}
	rep.Heartbeat = time.Nanosecond
	if beat := version(); beat == changed {
		t.Error("the heartbeat did not write an unchanged report")
	}
}

// A carved volume whose LV vanished behind Carve's back is reported as
// missing (status, a Warning on its LogicalVolume), from the second report
// that sees it, and not recreated.
func TestMissingVolumesAreReportedNotRecreated(t *testing.T) {
	r := newRig(t, lvResource("pvc-gone", node, 5*mib), lvResource("pvc-kept", node, 5*mib))
	for _, name := range []string{"pvc-gone", "pvc-kept"} {
		if _, err := r.reconcile(name); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.lvm.RemoveLV(ctx, "vg0", "pvc-gone"); err != nil { // an administrator's lvremove
		t.Fatal(err)
	}
	vols := lvmvol.NewManager(lvmvol.Config{LVM: r.lvm, Wiper: r.lvm, Node: node, VolumeGroups: []string{"vg0"}})
	rec := events.NewFakeRecorder(10)
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Volumes: vols.ListVolumes, Events: rec}
	for i, want := range [][]string{nil, {"vg0/pvc-gone"}, {"vg0/pvc-gone"}} {
		ns := reportedOn(t, r, rep)
		if !slices.Equal(ns.Status.MissingVolumes, want) || len(ns.Status.OrphanedVolumes) != 0 {
			t.Errorf("report %d: missing %v, orphans %v; want missing %v, no orphans", i+1,
				ns.Status.MissingVolumes, ns.Status.OrphanedVolumes, want)
		}
		if i == 1 {
			wantEvents(t, rec, "Warning VolumeMissing LV vg0/pvc-gone is gone")
		}
	}
	wantEvents(t, rec)
	if _, ok := r.lvm.LV("vg0", "pvc-gone"); ok {
		t.Error("the report recreated the missing LV")
	}
}

// The audit reads the LVs as a query (lvm.Cache, which sees changes made
// outside Carve late); while it has findings it confirms them on a fresh
// read every confirmEvery, so an administrator's lvremove of an orphan
// clears it; with no findings it reads nothing fresh.
func TestOrphanRemovedByHandClearsOnAFreshRead(t *testing.T) {
	r := newRig(t)
	vols := lvmvol.NewManager(lvmvol.Config{LVM: r.lvm, Wiper: r.lvm, Node: node, VolumeGroups: []string{"vg0"}})
	if _, err := vols.CreateVolume(ctx, volume.CreateRequest{Name: "pvc-orphan", Node: node, VG: "vg0",
		RequiredBytes: 5 * mib, ParamsDigest: "d"}); err != nil {
		t.Fatal(err)
	}
	stale, err := vols.ListVolumes(ctx, lvm.Fresh)
	if err != nil {
		t.Fatal(err)
	}
	fresh := 0
	list := func(c context.Context, reads lvm.Reads) ([]volume.Volume, error) {
		if reads.IsCached() {
			return stale, nil // what a cache read before the lvremove answers
		}
		fresh++
		return vols.ListVolumes(c, reads)
	}
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Volumes: list}
	orphans := func() []string { return reportedOn(t, r, rep).Status.OrphanedVolumes }
	orphans()
	if got := orphans(); !slices.Equal(got, []string{"vg0/pvc-orphan"}) || fresh != 1 {
		t.Fatalf("orphans %v after %d fresh reads, want [vg0/pvc-orphan] after 1", got, fresh)
	}
	if err := r.lvm.RemoveLV(ctx, "vg0", "pvc-orphan"); err != nil { // the administrator's lvremove
		t.Fatal(err)
	}
	if got := orphans(); len(got) != 1 || fresh != 1 {
		t.Errorf("within confirmEvery: orphans %v after %d fresh reads, want the cached view (1 orphan, 1 read)", got, fresh)
	}
	rep.confirmed = time.Time{} // confirmEvery has passed
	if got := orphans(); len(got) != 0 || fresh != 2 {
		t.Errorf("after confirmEvery: orphans %v after %d fresh reads, want none after 2", got, fresh)
	}
	stale = nil
	orphans()
	orphans()
	if fresh != 2 {
		t.Errorf("%d fresh reads with nothing to confirm, want still 2", fresh)
	}
}

// Two orphans found by one report are two events that reach the API server
// each with its own note: events.k8s.io folds events about one object
// with the same reason and action into one series, keeping the first
// note, unless their related objects differ (an e2e run lost the second
// orphan's event that way).
func TestEachOrphanIsAnEventOfItsOwn(t *testing.T) {
	r := newRig(t)
	vols := lvmvol.NewManager(lvmvol.Config{LVM: r.lvm, Wiper: r.lvm, Node: node, VolumeGroups: []string{"vg0"}})
	for _, name := range []string{"pvc-orphan-a", "pvc-orphan-b"} {
		if _, err := vols.CreateVolume(ctx, volume.CreateRequest{Name: name, Node: node, VG: "vg0",
			RequiredBytes: 5 * mib, ParamsDigest: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	rec, list := apiEvents(t, r)
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Volumes: vols.ListVolumes, Events: rec}
	for range 2 { // orphans are told from the second report that sees them
		if err := rep.Report(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var notes []string
	for _, e := range list(ReasonOrphaned, 2) {
		notes = append(notes, e.Note)
	}
	for _, lv := range []string{"vg0/pvc-orphan-a", "vg0/pvc-orphan-b"} {
		if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "LV "+lv+" ") }) {
			t.Errorf("no OrphanedVolume event tells of %s; the API server holds %q", lv, notes)
		}
	}
}

// apiEvents gives a recorder whose events reach the API server, and a
// function that waits (30 s at most) for want events of a reason about the
// node's NodeStorage there and returns those it finds.
func apiEvents(t *testing.T, r *rig) (events.EventRecorder, func(reason string, want int) []eventsv1.Event) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(server.Config)
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	b.StartRecordingToSink(stop)
	list := func(reason string, want int) []eventsv1.Event {
		var found []eventsv1.Event
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			all, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			found = slices.DeleteFunc(all.Items, func(e eventsv1.Event) bool { return e.Reason != reason || e.Regarding.Name != node })
			if len(found) >= want {
				break
			}
		}
		return found
	}
	return b.NewRecorder(r.c.Scheme(), "carve-node"), list
}

// reportedOn runs one storage report and returns the NodeStorage it wrote.
func reportedOn(t *testing.T, r *rig, rep *StorageReporter) v1alpha1.NodeStorage {
	t.Helper()
	if err := rep.Report(ctx); err != nil {
		t.Fatal(err)
	}
	var ns v1alpha1.NodeStorage
	if err := r.c.Get(ctx, types.NamespacedName{Name: node}, &ns); err != nil {
		t.Fatal(err)
	}
	return ns
}
