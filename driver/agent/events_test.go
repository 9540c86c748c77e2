package agent

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"carve.dev/carve/driver/api/v1alpha1"
)

// drain returns the events recorded so far.
func drain(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func wantEvents(t *testing.T, rec *events.FakeRecorder, prefixes ...string) {
	t.Helper()
	got := drain(rec)
	if len(got) != len(prefixes) {
		t.Fatalf("events %q, want %d starting with %q", got, len(prefixes), prefixes)
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(got[i], p) {
			t.Errorf("event %d: %q, want it to start with %q", i, got[i], p)
		}
	}
}

func TestEventsAndReadyCondition(t *testing.T) {
	r := newRig(t, lvResource("pvc-1", node, 4*mib), lvResource("pvc-big", node, 500*mib))
	rec := events.NewFakeRecorder(10)
	r.r.Events = rec

	lv, err := r.reconcile("pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	wantEvents(t, rec, "Normal Created created LV node-a/vg0/pvc-1")
	if !meta.IsStatusConditionTrue(lv.Status.Conditions, ConditionReady) {
		t.Errorf("conditions %+v: want Ready True", lv.Status.Conditions)
	}

	r.update(lv, func(lv *v1alpha1.LogicalVolume) { lv.Spec.PublishedNode = node })
	if lv, err = r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, rec, "Normal Published activated LV")
	r.update(lv, func(lv *v1alpha1.LogicalVolume) { lv.Spec.PublishedNode, lv.Spec.RequiredBytes = "", 8*mib })
	if _, err = r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, rec, "Normal Expanded expanded LV", "Normal Unpublished deactivated LV")

	// A reconcile that changes nothing says nothing.
	if _, err = r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	wantEvents(t, rec)

	big, err := r.reconcile("pvc-big")
	if err == nil {
		t.Fatal("a volume that cannot fit was created")
	}
	wantEvents(t, rec, "Warning Failed ResourceExhausted: ")
	c := big.Ready()
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ResourceExhausted" || c.Message == "" {
		t.Errorf("Ready condition of a failed volume: %+v", c)
	}
}
