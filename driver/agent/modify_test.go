package agent

import (
	"testing"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// TestModifyMirrorsFromSpec: a change of spec.type.mirrors converts the
// carved LV (held active for lvm2, left unpublished) and status.mirrors
// follows; legs the node cannot place fail with their code and leave
// status.mirrors as it was; a sync that runs on is Syncing, not failed.
func TestModifyMirrorsFromSpec(t *testing.T) {
	r := newRig(t, lvResource("pvc-1", node, 8*mib))
	r.lvm.SetPVCount("vg0", 2)
	lv, err := r.reconcile("pvc-1")
	if err != nil || lv.Status.Mirrors != 0 {
		t.Fatalf("create: %+v, %v", lv.Status, err)
	}
	mirrors := func() int {
		all, _ := r.lvm.ListAllLVs(ctx, lvm.Fresh, "vg0")
		return lvm.Mirrors(all, "pvc-1")
	}

	r.update(lv, func(lv *v1alpha1.LogicalVolume) { lv.Spec.Type.Mirrors = 1 })
	if lv, err = r.reconcile("pvc-1"); err != nil || lv.Status.Mirrors != 1 || lv.Status.Published {
		t.Fatalf("after mirrors 1: %+v, %v", lv.Status, err)
	}
	if l, _ := r.lvm.LV("vg0", "pvc-1"); mirrors() != 1 || l.Active {
		t.Fatalf("LV %+v with %d mirrors: want 1, inactive", l, mirrors())
	}
	n := len(r.lvm.Calls)
	if _, err = r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range r.lvm.Calls[n:] {
		if c == "ListAllLVs" || c == "ConvertMirrors" {
			t.Errorf("a reconcile with nothing to change ran %v", r.lvm.Calls[n:])
			break
		}
	}

	r.update(lv, func(lv *v1alpha1.LogicalVolume) { lv.Spec.Type.Mirrors = 2 })
	lv, err = r.reconcile("pvc-1")
	if volume.CodeOf(err).String() != "ResourceExhausted" || lv.Status.Mirrors != 1 || lv.Status.Error == nil || lv.Status.Error.Code != "ResourceExhausted" {
		t.Fatalf("3 legs on 2 PVs: %+v, %v", lv.Status, err)
	}

	r.withManager(lvmvol.Config{BackgroundDataWork: true}) // carve node's, with no grace
	r.lvm.ConvertSync = 50
	r.update(lv, func(lv *v1alpha1.LogicalVolume) { lv.Spec.Type.Mirrors = 0; lv.Spec.PublishedNode = node })
	if lv, err = r.reconcile("pvc-1"); err != nil || lv.Status.Mirrors != 0 || mirrors() != 0 || !lv.Status.Published {
		t.Fatalf("published, back to linear: %+v, %v", lv.Status, err)
	}
	r.update(lv, func(lv *v1alpha1.LogicalVolume) { lv.Spec.Type.Mirrors = 1 })
	// A sync under way is no failure: the reconcile looks again later.
	if lv, err = r.reconcile("pvc-1"); err != nil || lv.Status.Mirrors != 0 || lv.Status.Error != nil {
		t.Fatalf("while the new leg syncs: %+v, %v", lv.Status, err)
	}
	if c := lv.Status.Conditions; len(c) != 1 || c[0].Reason != ReasonSyncing {
		t.Fatalf("conditions while syncing: %+v", c)
	}
	r.lvm.SetSync("vg0", "pvc-1", 100)
	if lv, err = r.reconcile("pvc-1"); err != nil || lv.Status.Mirrors != 1 || mirrors() != 1 {
		t.Fatalf("once in sync: %+v, %v", lv.Status, err)
	}
}
