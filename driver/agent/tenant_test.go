package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

const tenantNS = "tenant-a"

// tenantClaim makes a claim in tenantNS and returns it as a requester.
func tenantClaim(t *testing.T, name string) *v1alpha1.Requester {
	t.Helper()
	pvc, _ := server.Claim(t, tenantNS, name)
	return &v1alpha1.Requester{APIVersion: "v1", Kind: volume.RequesterClaim, Namespace: tenantNS, Name: name, UID: string(pvc.UID)}
}

// apiRecorder records events into the test's API server, as carve node's
// recorder does, and returns a clientset to read them back.
func apiRecorder(t *testing.T) (events.EventRecorder, kubernetes.Interface) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(server.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	stop := make(chan struct{})
	b.StartRecordingToSink(stop)
	t.Cleanup(func() { close(stop); b.Shutdown() })
	return b.NewRecorder(s, "carve-node"), cs
}

// eventsAbout lists the events in ns about the object of uid, as
// "Type Reason: note" lines, waiting up to a minute for at least want.
func eventsAbout(t *testing.T, cs kubernetes.Interface, ns, uid string, want int) ([]string, []eventsv1.Event) {
	t.Helper()
	var lines []string
	var items []eventsv1.Event
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		l, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.uid=" + uid})
		if err != nil {
			t.Fatal(err)
		}
		lines, items = nil, l.Items
		for _, e := range l.Items {
			lines = append(lines, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Note))
		}
		if len(lines) >= want || time.Now().After(deadline) {
			return lines, items
		}
	}
}

// The agent's events about a volume made for a claim go on the claim too,
// in its namespace and naming it by UID (what `kubectl describe pvc`
// selects), with the volume's resource as the related object; once the
// volume is being deleted, only the resource gets them.
func TestEventsReachTheClaim(t *testing.T) {
	lv := lvResource("pvc-1", node, 4*mib)
	r := newRig(t)
	rec, cs := apiRecorder(t)
	lv.Spec.Requester = tenantClaim(t, "data")
	if err := r.c.Create(ctx, lv); err != nil {
		t.Fatal(err)
	}
	r.r.Events = rec
	got, err := r.reconcile("pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	lines, items := eventsAbout(t, cs, tenantNS, lv.Spec.Requester.UID, 1)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "Normal Created: created LV node-a/vg0/pvc-1") {
		t.Fatalf("events on the claim %q, want the Created one", lines)
	}
	e := items[0]
	if e.Regarding.Kind != volume.RequesterClaim || e.Regarding.Name != "data" || e.Regarding.Namespace != tenantNS ||
		e.Related == nil || e.Related.Kind != "LogicalVolume" || e.Related.Name != "pvc-1" {
		t.Errorf("event on the claim about %+v, related %+v", e.Regarding, e.Related)
	}
	if onLV, _ := eventsAbout(t, cs, "default", string(got.UID), 1); len(onLV) != 1 {
		t.Errorf("events on the LogicalVolume %q, want the Created one", onLV)
	}

	if err := r.c.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	if _, err := r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	if onLV, _ := eventsAbout(t, cs, "default", string(got.UID), 2); len(onLV) != 2 {
		t.Fatalf("events on the LogicalVolume %q, want Created and Deleted", onLV)
	}
	time.Sleep(time.Second) // the claim's would have been written right after
	if lines, _ := eventsAbout(t, cs, tenantNS, lv.Spec.Requester.UID, 1); len(lines) != 1 {
		t.Errorf("events on the claim after the deletion %q, want only the Created one", lines)
	}
}

// Data work tells the claim each step of its progress, one event each
// (the resource gets the start only); a resource made for no claim tells
// nothing more than before.
func TestProgressReachesTheClaim(t *testing.T) {
	claim := &v1alpha1.Requester{APIVersion: "v1", Kind: volume.RequesterClaim, Namespace: tenantNS, Name: "data", UID: "u-1"}
	for _, tc := range []struct {
		requester *v1alpha1.Requester
		want      []string
	}{
		{claim, []string{
			"Normal Copying Reconcile copy of vg0/pvc-2 runs in the background: 0% done",
			"Normal Copying Reconcile copy of vg0/pvc-2 runs in the background: 0% done {kind=PersistentVolumeClaim,apiVersion=v1}",
			"Normal Copying Reconcile 40% copy of vg0/pvc-2 runs in the background: 40% done {kind=PersistentVolumeClaim,apiVersion=v1}",
		}},
		{nil, []string{"Normal Copying Reconcile copy of vg0/pvc-2 runs in the background: 0% done"}},
	} {
		r := newRig(t)
		lv := lvResource("pvc-2", node, 4*mib)
		lv.Spec.Requester = tc.requester
		if err := r.c.Create(ctx, lv); err != nil {
			t.Fatal(err)
		}
		rec := &events.FakeRecorder{Events: make(chan string, 10), Verbose: true}
		r.r.Events = rec
		for _, done := range []int64{0, 5, 40, 45} {
			p := &volume.PendingError{Work: "copy", LV: "vg0/pvc-2", Done: done, Total: 100}
			if err := r.r.reportPending(ctx, lv, p); err != p {
				t.Fatalf("reportPending at %d%%: %v", done, err)
			}
		}
		wantEvents(t, rec, tc.want...)
		if err := r.c.Delete(ctx, lv); err != nil {
			t.Fatal(err)
		}
	}
}
