package agent

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
)

// running is the volume controller as `carve node` configures it
// (controllerOptions), fed by a channel instead of an informer.
type running struct {
	events chan event.GenericEvent
}

func (r *rig) run(t *testing.T) *running {
	t.Helper()
	opts := r.r.controllerOptions()
	opts.Reconciler = r.r
	skip := true
	opts.SkipNameValidation = &skip
	c, err := controller.NewUnmanaged("logicalvolume-test", opts)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan event.GenericEvent, 16)
	if err := c.Watch(source.Channel(ch, &handler.EnqueueRequestForObject{})); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Start(cctx); err != nil {
			t.Errorf("controller: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return &running{events: ch}
}

// kick enqueues a reconcile of name, as a watch event would.
func (c *running) kick(name string) {
	c.events <- event.GenericEvent{Object: lvResource(name, node, 1)}
}

// eventually polls cond for up to limit.
func (r *rig) eventually(limit time.Duration, name string, cond func(*v1alpha1.LogicalVolume) bool) (*v1alpha1.LogicalVolume, bool) {
	var lv v1alpha1.LogicalVolume
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if err := r.c.Get(ctx, types.NamespacedName{Name: name}, &lv); err == nil && cond(&lv) {
			return &lv, true
		}
	}
	return &lv, false
}

func (r *rig) get(name string) *v1alpha1.LogicalVolume {
	var lv v1alpha1.LogicalVolume
	if err := r.c.Get(ctx, types.NamespacedName{Name: name}, &lv); err != nil {
		r.t.Fatal(err)
	}
	return &lv
}

// asOnANode configures the rig's Manager as carve node does: long data
// work in the background, copies by the fake.
func (r *rig) asOnANode() {
	r.withManager(lvmvol.Config{BackgroundDataWork: true, DataGrace: DataGrace, Copier: r.lvm})
}

func clone(name, of string, size int64) *v1alpha1.LogicalVolume {
	v := lvResource(name, node, size)
	v.Spec.Source = &v1alpha1.ContentSource{Kind: volume.SourceVolume, ID: node + "/vg0/" + of}
	return v
}

// The regression test of a clone's copy holding a worker: while a clone's data is being copied,
// another volume on the node is published at once; the clone becomes
// Ready once its copy is done.
func TestPublishWhileACloneCopies(t *testing.T) {
	r := newRig(t, lvResource("pvc-src", node, 8*mib), lvResource("pvc-other", node, 4*mib), clone("pvc-clone", "pvc-src", 8*mib))
	r.asOnANode()
	for _, name := range []string{"pvc-src", "pvc-other"} {
		if _, err := r.reconcile(name); err != nil {
			t.Fatal(err)
		}
	}
	release := r.lvm.HoldCopies()
	defer release()
	c := r.run(t)
	c.kick("pvc-clone")
	if _, ok := r.eventually(5*time.Second, "pvc-clone", func(*v1alpha1.LogicalVolume) bool {
		return len(r.lvm.CopiedRanges()) == 1
	}); !ok {
		t.Fatal("the clone's copy never started")
	}

	r.update(r.get("pvc-other"), func(lv *v1alpha1.LogicalVolume) { lv.Spec.PublishedNode = node })
	c.kick("pvc-other")
	if got, ok := r.eventually(5*time.Second, "pvc-other", func(lv *v1alpha1.LogicalVolume) bool { return lv.Status.Published }); !ok {
		t.Fatalf("another volume was not published while a clone copies: %+v", got.Status)
	}
	if got := r.get("pvc-clone"); got.Status.VolumeID != "" {
		t.Fatalf("the clone is Ready before its copy ended: %+v", got.Status)
	}

	release()
	if got, ok := r.eventually(10*time.Second, "pvc-clone", func(lv *v1alpha1.LogicalVolume) bool {
		return lv.Status.Phase == v1alpha1.PhaseReady && lv.Status.VolumeID != ""
	}); !ok {
		t.Fatalf("the clone did not become Ready after its copy: %+v", got.Status)
	}
	if n := len(r.lvm.CopiedRanges()); n != 1 {
		t.Errorf("%d copies made, want one", n)
	}
}

// A clone whose copy runs is reported Copying (not Ready, no failure, no
// Warning) and looked at again soon; deleting it meanwhile stops the copy
// and removes the LV.
func TestCopyingIsReportedThenDeletable(t *testing.T) {
	r := newRig(t, lvResource("pvc-src", node, 8*mib), clone("pvc-clone", "pvc-src", 8*mib))
	r.withManager(lvmvol.Config{BackgroundDataWork: true, DataGrace: 10 * time.Millisecond, Copier: r.lvm})
	rec := events.NewFakeRecorder(10)
	r.r.Events = rec
	if _, err := r.reconcile("pvc-src"); err != nil {
		t.Fatal(err)
	}
	drain(rec)
	release := r.lvm.HoldCopies()
	defer release()
	for i := range 2 {
		res, err := r.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "pvc-clone"}})
		if err != nil || res.RequeueAfter <= 0 {
			t.Fatalf("reconcile %d while copying: %+v, %v; want a requeue and no error", i, res, err)
		}
	}
	lv := r.get("pvc-clone")
	c := lv.Ready()
	if lv.Status.Phase != v1alpha1.PhasePending || lv.Status.Error != nil || lv.Status.VolumeID != "" ||
		c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonCopying {
		t.Fatalf("status while copying: %+v", lv.Status)
	}
	wantEvents(t, rec, "Normal Copying copy of vg0/pvc-clone")

	if err := r.c.Delete(ctx, lv); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.eventually(5*time.Second, "pvc-clone", func(*v1alpha1.LogicalVolume) bool {
		gone, err := r.reconcile("pvc-clone")
		return gone == nil && err == nil
	}); !ok {
		t.Fatal("a clone being copied was not deleted")
	}
	if _, ok := r.lvm.LV("vg0", "pvc-clone"); ok {
		t.Error("LV left behind")
	}
	if _, ok := r.lvm.LV("vg0", "pvc-clone-frz"); ok {
		t.Error("frozen point left behind")
	}
}
