package agent

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
)

// A volume whose class asks for it (recreateBlankWhenLost) and whose LV
// was lost is carved again, blank, at its size (grown since its
// creation), published again where the spec says, with a Warning saying
// so; the same loss of a volume without the opt-in stays a failure
// (TestVanishedVolumeIsNotRecreatedBlank), and a VG that lvm2 cannot
// read recreates nothing.
func TestLostVolumeIsRecreatedBlankWhenAsked(t *testing.T) {
	v := lvResource("pvc-1", node, 4*mib)
	v.Spec.RecreateBlankWhenLost, v.Spec.PublishedNode = true, node
	r := newRig(t, v)
	rec := events.NewFakeRecorder(10)
	r.r.Events = rec
	lv, err := r.reconcile("pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	r.update(lv, func(lv *v1alpha1.LogicalVolume) { lv.Spec.RequiredBytes = 8 * mib })
	if _, err := r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	before, ok := r.lvm.LV("vg0", "pvc-1")
	if !ok || before.Size != 8*mib {
		t.Fatalf("grown LV: %+v, %v", before, ok)
	}
	drain(rec)

	// The VG cannot be read (its disk is absent): no answer, no recreate.
	r.lvm.SetMissingPVs("vg0", 1)
	if err := r.lvm.RemoveLV(ctx, "vg0", "pvc-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.reconcile("pvc-1"); err == nil {
		t.Error("a reconcile in a VG missing its PV succeeded")
	}
	if _, ok := r.lvm.LV("vg0", "pvc-1"); ok {
		t.Fatal("recreated in a VG missing a PV")
	}
	drain(rec)

	// The disk is replaced (the VG whole again, the LV gone): recreated.
	r.lvm.SetMissingPVs("vg0", 0)
	lv, err = r.reconcile("pvc-1")
	if err != nil || lv.Status.Phase != v1alpha1.PhaseReady {
		t.Fatalf("reconcile after the loss: %+v, %v", lv.Status, err)
	}
	after, ok := r.lvm.LV("vg0", "pvc-1")
	if !ok || after.Size != 8*mib || after.UUID == before.UUID || !after.Active {
		t.Fatalf("recreated LV %+v (was %+v): want a new one of 8 MiB, active (published)", after, before)
	}
	if lv.Status.VolumeID != "node-a/vg0/pvc-1" || !lv.Status.Published {
		t.Errorf("status %+v: want the same volume ID, published", lv.Status)
	}
	got := drain(rec)
	if !slices.ContainsFunc(got, func(e string) bool {
		return strings.HasPrefix(e, "Warning RecreatedBlank LV node-a/vg0/pvc-1 was lost")
	}) {
		t.Errorf("events %q: want a RecreatedBlank warning", got)
	}
	// Once there, it is not recreated again.
	if _, err := r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	if again, _ := r.lvm.LV("vg0", "pvc-1"); again.UUID != after.UUID {
		t.Error("a second reconcile recreated the volume again")
	}
}

// The audit wakes the reconciler of a lost volume whose class asks for
// it to be recreated (an annotation: nothing else changes on the
// resource), saying so in its Warning; a lost volume without the opt-in
// gets no annotation.
func TestAuditWakesLostVolumesToRecreate(t *testing.T) {
	asked := lvResource("pvc-asked", node, 5*mib)
	asked.Spec.RecreateBlankWhenLost = true
	r := newRig(t, asked, lvResource("pvc-not", node, 5*mib))
	for _, name := range []string{"pvc-asked", "pvc-not"} {
		if _, err := r.reconcile(name); err != nil {
			t.Fatal(err)
		}
		if err := r.lvm.RemoveLV(ctx, "vg0", name); err != nil {
			t.Fatal(err)
		}
	}
	vols := lvmvol.NewManager(lvmvol.Config{LVM: r.lvm, Wiper: r.lvm, Node: node, VolumeGroups: []string{"vg0"}})
	rec := events.NewFakeRecorder(10)
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Volumes: vols.ListVolumes, Events: rec}
	for range 2 {
		reportedOn(t, r, rep)
	}
	got := drain(rec)
	if !slices.ContainsFunc(got, func(e string) bool {
		return strings.HasPrefix(e, "Warning VolumeMissing LV vg0/pvc-asked is gone") && strings.Contains(e, "recreate it blank")
	}) {
		t.Errorf("events %q: want the asked volume's VolumeMissing saying it is recreated", got)
	}
	for name, want := range map[string]bool{"pvc-asked": true, "pvc-not": false} {
		var lv v1alpha1.LogicalVolume
		if err := r.c.Get(ctx, types.NamespacedName{Name: name}, &lv); err != nil {
			t.Fatal(err)
		}
		if _, has := lv.Annotations[LostAnnotation]; has != want {
			t.Errorf("%s: annotation %s present %v, want %v", name, LostAnnotation, has, want)
		}
	}
}
