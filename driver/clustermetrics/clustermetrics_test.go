package clustermetrics

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/nodeloss"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

// objMeta is an object's metadata: created ago, at generation gen, being
// deleted since deleted ago (0: not).
func objMeta(name string, gen int64, created, deleted time.Duration) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: gen, CreationTimestamp: at(-created),
		Finalizers: []string{v1alpha1.VolumeFinalizer}}
	if deleted != 0 {
		d := at(-deleted)
		m.DeletionTimestamp = &d
	}
	return m
}

// ready is the agent's Ready condition, status s since ago.
func ready(s metav1.ConditionStatus, reason string, since time.Duration) []metav1.Condition {
	return []metav1.Condition{{Type: agent.ConditionReady, Status: s, Reason: reason, LastTransitionTime: at(-since)}}
}

func volume(m metav1.ObjectMeta, node string, st v1alpha1.LogicalVolumeStatus) *v1alpha1.LogicalVolume {
	return &v1alpha1.LogicalVolume{ObjectMeta: m, Spec: v1alpha1.LogicalVolumeSpec{NodeName: node}, Status: st}
}

var failure = &v1alpha1.OperationError{Code: "Internal", Message: "lvcreate failed"}

// objects: one resource of each case, on nodes n1 and n2, and the nodes'
// NodeStorages.
func objects() []client.Object {
	return []client.Object{
		// Done: not listed.
		volume(objMeta("done", 1, time.Hour, 0), "n1", v1alpha1.LogicalVolumeStatus{ObservedGeneration: 1,
			Phase: v1alpha1.PhaseReady, Conditions: ready(metav1.ConditionTrue, "Reconciled", time.Hour)}),
		// Never reported on: waiting since its creation.
		volume(objMeta("new", 1, 10*time.Minute, 0), "n1", v1alpha1.LogicalVolumeStatus{}),
		// A copy into it runs: working since Ready went False.
		volume(objMeta("copying", 1, time.Hour, 0), "n1", v1alpha1.LogicalVolumeStatus{ObservedGeneration: 1,
			Phase: v1alpha1.PhasePending, Conditions: ready(metav1.ConditionFalse, "Copying", 3*time.Minute)}),
		// Its last change failed (the LV exists: Ready phase).
		volume(objMeta("failing", 2, time.Hour, 0), "n1", v1alpha1.LogicalVolumeStatus{ObservedGeneration: 2,
			Phase: v1alpha1.PhaseReady, Error: failure, Conditions: ready(metav1.ConditionFalse, "Internal", 20*time.Minute)}),
		// Changed (expanded) since the agent's last report.
		volume(objMeta("changed", 3, time.Hour, 0), "n1", v1alpha1.LogicalVolumeStatus{ObservedGeneration: 2,
			Phase: v1alpha1.PhaseReady, Conditions: ready(metav1.ConditionTrue, "Reconciled", time.Hour)}),
		// Deleted, the agent not at it yet; and deleted, its wipe running.
		volume(objMeta("deleting", 2, time.Hour, 30*time.Minute), "n1", v1alpha1.LogicalVolumeStatus{ObservedGeneration: 1,
			Phase: v1alpha1.PhaseReady, Conditions: ready(metav1.ConditionTrue, "Reconciled", time.Hour)}),
		volume(objMeta("wiping", 2, time.Hour, 2*time.Minute), "n1", v1alpha1.LogicalVolumeStatus{ObservedGeneration: 2,
			Phase: v1alpha1.PhaseReady, Conditions: ready(metav1.ConditionFalse, "Wiping", time.Minute)}),
		// A failure about an older generation is stale: waiting on the new.
		volume(objMeta("retried", 2, time.Hour, 0), "n2", v1alpha1.LogicalVolumeStatus{ObservedGeneration: 1,
			Phase: v1alpha1.PhaseFailed, Error: failure, Conditions: ready(metav1.ConditionFalse, "Internal", 40*time.Minute)}),
		&v1alpha1.LogicalVolumeSnapshot{ObjectMeta: objMeta("snap-failing", 1, time.Hour, 0),
			Spec: v1alpha1.LogicalVolumeSnapshotSpec{NodeName: "n2"},
			Status: v1alpha1.LogicalVolumeSnapshotStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseFailed, Error: failure,
				Conditions: ready(metav1.ConditionFalse, "ResourceExhausted", 7*time.Minute)}},
		&v1alpha1.LogicalVolumeSnapshot{ObjectMeta: objMeta("snap-done", 1, time.Hour, 0),
			Spec: v1alpha1.LogicalVolumeSnapshotSpec{NodeName: "n2"},
			Status: v1alpha1.LogicalVolumeSnapshotStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseReady,
				Conditions: ready(metav1.ConditionTrue, "Reconciled", time.Hour)}},
		&v1alpha1.LogicalVolumeGroupSnapshot{ObjectMeta: objMeta("group-new", 1, 90*time.Second, 0),
			Spec: v1alpha1.LogicalVolumeGroupSnapshotSpec{NodeName: "n2"}},
		&v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: at(-time.Hour)},
			Status: v1alpha1.NodeStorageStatus{UpdateTime: at(-time.Minute)}},
		// Not reported yet: its creation stands for its report.
		&v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: "n2", CreationTimestamp: at(-5 * time.Second)}},
		// Declared lost: left out (carve_lost_node_resources tells of it).
		&v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: "n3", CreationTimestamp: at(-time.Hour),
			Annotations: map[string]string{nodeloss.Annotation: "true"}},
			Status: v1alpha1.NodeStorageStatus{UpdateTime: at(-48 * time.Hour)}},
	}
}

func newClient(t *testing.T, objs ...client.Object) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func TestReadClassifiesAndDates(t *testing.T) {
	now := t0
	r := &Reader{Cache: newClient(t, objects()...), Now: func() time.Time { return now }}
	// read reads at d past t0: the unfinished ones as "kind node state
	// age", sorted, and the reports.
	read := func(d time.Duration) ([]string, map[string]time.Time) {
		t.Helper()
		now = t0.Add(d)
		st, err := r.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range st.Unfinished {
			out = append(out, fmt.Sprintf("%s %s %s %v", u.Kind, u.Node, u.State, now.Sub(u.Since)))
		}
		slices.Sort(out)
		return out, st.Reports
	}
	got, reports := read(0)
	want := []string{
		"group_snapshot n2 waiting 1m30s",
		"snapshot n2 failing 7m0s",
		"volume n1 failing 20m0s",
		"volume n1 waiting 0s", // changed: first seen now
		"volume n1 waiting 10m0s",
		"volume n1 waiting 30m0s",
		"volume n1 working 1m0s",
		"volume n1 working 3m0s",
		"volume n2 waiting 0s", // retried: a new generation, first seen now
	}
	if !slices.Equal(got, want) {
		t.Errorf("unfinished:\n%q\nwant:\n%q", got, want)
	}
	wantReports := map[string]time.Time{"n1": t0.Add(-time.Minute), "n2": t0.Add(-5 * time.Second)}
	if len(reports) != len(wantReports) {
		t.Errorf("reports %v, want %v", reports, wantReports)
	}
	for node, w := range wantReports {
		if !reports[node].Equal(w) {
			t.Errorf("report of %s %v, want %v", node, reports[node], w)
		}
	}

	// Five minutes on, a change not reported on is five minutes old;
	// changed again, its count starts again.
	if got, _ := read(5 * time.Minute); !slices.Contains(got, "volume n1 waiting 5m0s") || !slices.Contains(got, "volume n2 waiting 5m0s") {
		t.Errorf("changes not reported on, 5 minutes later: %q", got)
	}
	var lv v1alpha1.LogicalVolume
	if err := r.Cache.Get(context.Background(), client.ObjectKey{Name: "changed"}, &lv); err != nil {
		t.Fatal(err)
	}
	lv.Generation = 4
	if err := r.Cache.(client.Client).Update(context.Background(), &lv); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(6 * time.Minute); !slices.Contains(got, "volume n1 waiting 0s") || !slices.Contains(got, "volume n2 waiting 6m0s") {
		t.Errorf("after a second change: %q", got)
	}
	if len(r.seen) != 2 {
		t.Errorf("%d first sightings kept, want the 2 unreported changes", len(r.seen))
	}
}

// TestDoneLeavesNothing: with every resource done, nothing is unfinished
// and no first sighting is kept.
func TestDoneLeavesNothing(t *testing.T) {
	r := &Reader{Cache: newClient(t, objects()[0])}
	r.seen = map[types.UID]seen{"gone": {1, t0}}
	st, err := r.Read(context.Background())
	if err != nil || len(st.Unfinished) != 0 || len(r.seen) != 0 {
		t.Errorf("unfinished %v, kept %v, err %v; want none", st.Unfinished, r.seen, err)
	}
}
