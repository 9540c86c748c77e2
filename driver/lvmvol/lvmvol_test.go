package lvmvol_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"carve.dev/carve/driver/lvmvol"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

const (
	node = "node-a"
	vg   = "vg0"
	mib  = 1 << 20
)

var ctx = context.Background()

func newManager(t *testing.T) (*lvmvol.Manager, *lvmfake.LVM) {
	t.Helper()
	f := lvmfake.New(100*mib, vg)
	return managerOn(f, lvmvol.Config{}), f
}

// managerOn is the Manager of vg on node over fake f, lvm2 and wiper, with
// cfg's other settings.
func managerOn(f *lvmfake.LVM, cfg lvmvol.Config) *lvmvol.Manager {
	cfg.LVM, cfg.Wiper, cfg.Node, cfg.VolumeGroups = f, f, node, []string{vg}
	return lvmvol.NewManager(cfg)
}

func mustCreate(t *testing.T, m *lvmvol.Manager, name string, size int64) volume.Volume {
	t.Helper()
	v, err := m.CreateVolume(ctx, req(name, size))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func vgFree(f *lvmfake.LVM) uint64 { g, _ := f.GetVG(ctx, lvm.Fresh, vg); return g.Free }

func req(name string, size int64) volume.CreateRequest {
	return volume.CreateRequest{Name: name, VG: vg, RequiredBytes: size, ParamsDigest: "p1"}
}

func TestCreateLeavesVolumeInactiveAndSettled(t *testing.T) {
	m, f := newManager(t)
	vol, err := m.CreateVolume(ctx, req("pvc-1", 5*mib))
	if err != nil {
		t.Fatal(err)
	}
	if vol.SizeBytes != 8*mib {
		t.Errorf("size %d, want 8 MiB (5 MiB rounded up to 4 MiB extents)", vol.SizeBytes)
	}
	if vol.ID != (volume.ID{Node: node, VG: vg, LV: "pvc-1"}) || vol.Published {
		t.Errorf("volume = %+v, want inactive %s/%s/pvc-1", vol, node, vg)
	}
	lv, _ := f.LV(vg, "pvc-1")
	if lv.Active {
		t.Error("new LV left active: only publish may activate it")
	}
	for _, tag := range []string{lvmvol.TagVolume, "carve.dev/params=p1", "carve.dev/name=pvc-1"} {
		if !lv.HasTag(tag) {
			t.Errorf("LV tags %v miss %q", lv.Tags, tag)
		}
	}
	if lv.HasTag("carve.dev/pending") {
		t.Error("pending tag left on a finished create")
	}
}

func TestCreateIsIdempotent(t *testing.T) {
	m, f := newManager(t)
	first, err := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	f.Calls = nil
	again, err := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.SizeBytes != first.SizeBytes {
		t.Errorf("second create = %+v, want %+v", again, first)
	}
	// lvcreate is the lookup: it fails on the taken name, changing
	// nothing, and only then is the LV read and adopted.
	if want := []string{"GetVG", "CreateLV", "GetLV"}; !slices.Equal(f.Calls, want) {
		t.Errorf("second create ran %v, want %v", f.Calls, want)
	}
}

func TestCreateConflicts(t *testing.T) {
	m, f := newManager(t)
	if _, err := m.CreateVolume(ctx, req("pvc-1", 8*mib)); err != nil {
		t.Fatal(err)
	}
	other := req("pvc-1", 8*mib)
	other.ParamsDigest = "p2"
	bigger := req("pvc-1", 12*mib)
	limited := req("pvc-1", 4*mib)
	limited.LimitBytes = 4 * mib
	for name, r := range map[string]volume.CreateRequest{"params": other, "size": bigger, "limit": limited} {
		if _, err := m.CreateVolume(ctx, r); !errors.Is(err, volume.ErrNameConflict) {
			t.Errorf("%s: error = %v, want ErrNameConflict", name, err)
		}
	}
	f.Put(lvm.LV{Name: "admins", VGName: vg, Size: 4 * mib})
	if _, err := m.CreateVolume(ctx, req("admins", 4*mib)); !errors.Is(err, volume.ErrNameConflict) {
		t.Errorf("LV not Carve's: error = %v, want ErrNameConflict", err)
	}
}

func TestCreateRefusesBeforeLVCreate(t *testing.T) {
	m, f := newManager(t)
	if _, err := m.CreateVolume(ctx, req("big", 200*mib)); !errors.Is(err, lvm.ErrNoSpace) {
		t.Errorf("too big: error = %v, want lvm.ErrNoSpace", err)
	}
	r := req("odd", 5*mib)
	r.LimitBytes = 6 * mib
	if _, err := m.CreateVolume(ctx, r); !errors.Is(err, volume.ErrOutOfRange) {
		t.Errorf("limit below rounded size: error = %v, want ErrOutOfRange", err)
	}
	other := req("x", 4*mib)
	other.VG = "vg9"
	if _, err := m.CreateVolume(ctx, other); !errors.Is(err, volume.ErrUnmanagedVG) {
		t.Errorf("unserved VG: error = %v, want ErrUnmanagedVG", err)
	}
	elsewhere := req("y", 4*mib)
	elsewhere.Node = "node-b"
	if _, err := m.CreateVolume(ctx, elsewhere); !errors.Is(err, volume.ErrWrongNode) {
		t.Errorf("another node asked: error = %v, want ErrWrongNode", err)
	}
	if slices.Contains(f.Calls, "CreateLV") {
		t.Error("lvcreate ran for a request that could not fit")
	}
}

func TestCreateResumesAfterCrash(t *testing.T) {
	m, f := newManager(t)
	// Crash right after lvcreate: the LV is active and still pending.
	f.Fail = func(call string) error {
		if call == "Deactivate" {
			return errors.New("killed")
		}
		return nil
	}
	if _, err := m.CreateVolume(ctx, req("pvc-1", 8*mib)); err == nil {
		t.Fatal("create succeeded through a failed deactivation")
	}
	if _, err := m.GetVolume(ctx, lvm.Fresh, volume.ID{Node: node, VG: vg, LV: "pvc-1"}); !errors.Is(err, volume.ErrVolumeNotFound) {
		t.Errorf("half-created volume visible: %v", err)
	}
	f.Fail = nil
	vol, err := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	lv, _ := f.LV(vg, "pvc-1")
	if lv.Active || lv.HasTag("carve.dev/pending") || vol.Published {
		t.Errorf("retry did not finish the create: %+v", lv)
	}
}

func TestCreateFinishesInterruptedDelete(t *testing.T) {
	m, f := newManager(t)
	f.Put(lvm.LV{Name: "pvc-1", VGName: vg, Size: 8 * mib, Active: true,
		Tags: []string{lvmvol.TagVolume, "carve.dev/deleting", "carve.dev/params=p1"}})
	if _, err := m.CreateVolume(ctx, req("pvc-1", 8*mib)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Wiped, []string{"/dev/vg0/pvc-1"}) {
		t.Errorf("wiped %v, want the interrupted volume wiped before reuse", f.Wiped)
	}
	lv, _ := f.LV(vg, "pvc-1")
	if lv.HasTag("carve.dev/deleting") {
		t.Error("new volume carries the old one's deleting tag")
	}
}

func TestDelete(t *testing.T) {
	m, f := newManager(t)
	vol, err := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	f.Calls = nil
	if err := m.DeleteVolume(ctx, vol.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.LV(vg, "pvc-1"); ok {
		t.Error("LV still there after delete")
	}
	// The lookup's report also tells that the VG has all its PVs.
	want := []string{"GetLV", "RetagAndActivate", "Wipe", "RemoveLVOf"}
	if !slices.Equal(f.Calls, want) {
		t.Errorf("delete steps %v, want %v (VG intact, mark and activate, wipe, then remove)", f.Calls, want)
	}
	if err := m.DeleteVolume(ctx, vol.ID); err != nil {
		t.Errorf("second delete: %v, want success", err)
	}
	if err := m.DeleteVolume(ctx, volume.ID{Node: "other", VG: vg, LV: "x"}); err != nil {
		t.Errorf("delete of a volume unknown here: %v, want success", err)
	}
}

func TestDeleteRefusesPublishedOpenAndForeign(t *testing.T) {
	m, f := newManager(t)
	vol, _ := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	if _, err := m.PublishVolume(ctx, vol.ID, node); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteVolume(ctx, vol.ID); !errors.Is(err, volume.ErrInUse) {
		t.Errorf("delete published: %v, want ErrInUse", err)
	}
	f.SetOpen(vg, "pvc-1", true)
	if err := m.DeleteVolume(ctx, vol.ID); !errors.Is(err, volume.ErrInUse) {
		t.Errorf("delete open: %v, want ErrInUse", err)
	}
	f.Put(lvm.LV{Name: "admins", VGName: vg, Size: 4 * mib})
	if err := m.DeleteVolume(ctx, volume.ID{Node: node, VG: vg, LV: "admins"}); !errors.Is(err, volume.ErrNotManaged) {
		t.Errorf("delete LV not Carve's: %v, want ErrNotManaged", err)
	}
	if len(f.Wiped) != 0 {
		t.Errorf("refused deletes wiped %v", f.Wiped)
	}
}

func TestDeleteResumesAfterCrashInWipe(t *testing.T) {
	m, f := newManager(t)
	vol, _ := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	f.Fail = func(call string) error {
		if call == "Wipe" {
			return errors.New("killed")
		}
		return nil
	}
	if err := m.DeleteVolume(ctx, vol.ID); err == nil {
		t.Fatal("delete succeeded through a failed wipe")
	}
	if vols, _ := m.ListVolumes(ctx, lvm.Fresh); len(vols) != 0 {
		t.Errorf("volume being deleted is listed: %+v", vols)
	}
	f.Fail = nil
	if err := m.DeleteVolume(ctx, vol.ID); err != nil {
		t.Fatalf("retry of an interrupted delete: %v", err)
	}
	if _, ok := f.LV(vg, "pvc-1"); ok || len(f.Wiped) != 1 {
		t.Errorf("retry left LV=%v wiped=%v", ok, f.Wiped)
	}
}

func TestPublishUnpublish(t *testing.T) {
	m, f := newManager(t)
	vol, _ := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	if _, err := m.PublishVolume(ctx, vol.ID, "node-b"); !errors.Is(err, volume.ErrNodeNotFound) {
		t.Errorf("publish to another node: %v, want ErrNodeNotFound", err)
	}
	missing := volume.ID{Node: node, VG: vg, LV: "nope"}
	if _, err := m.PublishVolume(ctx, missing, node); !errors.Is(err, volume.ErrVolumeNotFound) {
		t.Errorf("publish missing: %v, want ErrVolumeNotFound", err)
	}
	for range 2 {
		dev, err := m.PublishVolume(ctx, vol.ID, node)
		if err != nil || dev != "/dev/vg0/pvc-1" {
			t.Fatalf("publish = %q, %v", dev, err)
		}
	}
	if lv, _ := f.LV(vg, "pvc-1"); !lv.Active {
		t.Error("published LV not active")
	}
	f.SetOpen(vg, "pvc-1", true)
	if err := m.UnpublishVolume(ctx, vol.ID, node); !errors.Is(err, volume.ErrInUse) {
		t.Errorf("unpublish open: %v, want ErrInUse", err)
	}
	f.SetOpen(vg, "pvc-1", false)
	for range 2 {
		if err := m.UnpublishVolume(ctx, vol.ID, node); err != nil {
			t.Fatalf("unpublish: %v", err)
		}
	}
	if lv, _ := f.LV(vg, "pvc-1"); lv.Active {
		t.Error("unpublished LV still active")
	}
	if err := m.UnpublishVolume(ctx, missing, node); err != nil {
		t.Errorf("unpublish missing: %v, want success", err)
	}
}

func TestListAndCapacity(t *testing.T) {
	m, f := newManager(t)
	for i := 3; i > 0; i-- {
		if _, err := m.CreateVolume(ctx, req(fmt.Sprintf("pvc-%d", i), 4*mib)); err != nil {
			t.Fatal(err)
		}
	}
	f.Put(lvm.LV{Name: "admins", VGName: vg, Size: 4 * mib})
	f.Put(lvm.LV{Name: "half", VGName: vg, Size: 4 * mib, Tags: []string{lvmvol.TagVolume, "carve.dev/pending"}})
	vols, err := m.ListVolumes(ctx, lvm.Fresh)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vols {
		names = append(names, v.ID.LV)
	}
	if !slices.Equal(names, []string{"pvc-1", "pvc-2", "pvc-3"}) {
		t.Errorf("listed %v, want the three settled Carve volumes in order", names)
	}
	c, err := m.Capacity(ctx, node, volume.OneVG(vg), volume.Type{})
	if err != nil || c.AvailableBytes != 80*mib || c.MaximumVolumeBytes != 80*mib {
		t.Errorf("capacity = %+v, %v; want 80 MiB free", c, err)
	}
	if c, _ := m.Capacity(ctx, "node-b", volume.OneVG(vg), volume.Type{}); c.AvailableBytes != 0 {
		t.Errorf("capacity on another node = %+v, want 0", c)
	}
}

func TestHealthFromAttributes(t *testing.T) {
	m, f := newManager(t)
	f.Put(lvm.LV{Name: "p", VGName: vg, Size: 4 * mib, Partial: true, Tags: []string{lvmvol.TagVolume}})
	f.Put(lvm.LV{Name: "r", VGName: vg, Size: 4 * mib, Health: "refresh needed", Tags: []string{lvmvol.TagVolume}})
	f.Put(lvm.LV{Name: "m", VGName: vg, Size: 4 * mib, Health: "mismatches exist", Tags: []string{lvmvol.TagVolume}})
	f.Put(lvm.LV{Name: "ok", VGName: vg, Size: 4 * mib, Tags: []string{lvmvol.TagVolume}})
	// A raid1 with a leg gone still serves its data: degraded.
	f.Put(lvm.LV{Name: "leg", VGName: vg, Size: 4 * mib, Layout: "raid,raid1", Partial: true, SyncPercent: 100, Active: true,
		Tags: []string{lvmvol.TagVolume}})
	want := map[string][]volume.ProblemKind{"p": {volume.Inaccessible}, "r": {volume.Degraded}, "m": {volume.Degraded}, "ok": nil,
		"leg": {volume.Degraded}}
	reasons := map[string]string{"r": "RAIDRefreshNeeded", "m": "LVMHealth"}
	for name, kinds := range want {
		vol, err := m.GetVolume(ctx, lvm.Fresh, volume.ID{Node: node, VG: vg, LV: name})
		if err != nil {
			t.Fatal(err)
		}
		var got []volume.ProblemKind
		for _, p := range vol.Health {
			got = append(got, p.Kind)
		}
		if !slices.Equal(got, kinds) {
			t.Errorf("%s: health kinds %v, want %v (%+v)", name, got, kinds, vol.Health)
		}
		if reason, ok := reasons[name]; ok && (len(vol.Health) != 1 || vol.Health[0].Reason != reason) {
			t.Errorf("health of %s: %+v; want reason %s", name, vol.Health, reason)
		}
	}
}

func TestPublishLimit(t *testing.T) {
	m := managerOn(lvmfake.New(100*mib, vg), lvmvol.Config{MaxPublished: 2})
	var ids []volume.ID
	for i := range 3 {
		vol, err := m.CreateVolume(ctx, req(fmt.Sprintf("pvc-%d", i), 4*mib))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, vol.ID)
	}
	for _, id := range ids[:2] {
		if _, err := m.PublishVolume(ctx, id, node); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.PublishVolume(ctx, ids[2], node); !errors.Is(err, volume.ErrPublishLimit) {
		t.Errorf("third publish: %v, want ErrPublishLimit", err)
	}
	if _, err := m.PublishVolume(ctx, ids[0], node); err != nil {
		t.Errorf("republishing a published volume counts against the limit: %v", err)
	}
	if err := m.UnpublishVolume(ctx, ids[0], node); err != nil {
		t.Fatal(err)
	}
	if _, err := m.PublishVolume(ctx, ids[2], node); err != nil {
		t.Errorf("publish after a slot freed: %v", err)
	}
}

// A VG whose disks all fail reads as "not found" in lvm2: that must not
// make its volumes look deleted (found on real disks by test/faults).
func TestUnreadableVGIsNoAnswer(t *testing.T) {
	m, f := newManager(t)
	vol, err := m.CreateVolume(ctx, req("pvc-u", 4*mib))
	if err != nil {
		t.Fatal(err)
	}
	f.Fail = func(call string) error {
		if call == "GetLV" || call == "GetVG" || call == "ListLVs" {
			return fmt.Errorf("vgs %s: %w", vg, lvm.ErrNotFound)
		}
		return nil
	}
	if _, err := m.GetVolume(ctx, lvm.Fresh, vol.ID); !errors.Is(err, volume.ErrVGUnreadable) || volume.CodeOf(err) != codes.Unavailable {
		t.Errorf("GetVolume on an unreadable VG: %v (code %v), want ErrVGUnreadable, UNAVAILABLE", err, volume.CodeOf(err))
	}
	if err := m.DeleteVolume(ctx, vol.ID); err == nil {
		t.Error("DeleteVolume on an unreadable VG said done")
	}
	if _, err := m.CreateVolume(ctx, req("pvc-new", 4*mib)); volume.CodeOf(err) != codes.Unavailable {
		t.Errorf("CreateVolume on an unreadable VG: %v (code %v), want UNAVAILABLE", err, volume.CodeOf(err))
	}
	if _, err := m.Capacity(ctx, node, volume.OneVG(vg), volume.Type{}); volume.CodeOf(err) != codes.Unavailable {
		t.Errorf("Capacity of an unreadable VG: %v (code %v), want UNAVAILABLE", err, volume.CodeOf(err))
	}
	f.Fail = nil
	if _, ok := f.LV(vg, vol.ID.LV); !ok {
		t.Error("the volume is gone")
	}
}

// With a PV missing lvm2 refuses lvcreate but takes tag changes and
// lvremove, and then keeps the PV marked missing after the disk is back,
// refusing every lvcreate until `vgextend --restoremissing` (found on real
// disks by test/faults). So every call that would change such a VG is
// UNAVAILABLE before any lvm2 change, and goes through once the PV is back.
func TestVGMissingAPVIsNotChanged(t *testing.T) {
	f := lvmfake.New(100*mib, vg)
	m := managerOn(f, lvmvol.Config{Copier: f})
	f.PutThinPool(vg, "pool", 40*mib, 0)
	thick, err := m.CreateVolume(ctx, req("pvc-thick", 4*mib))
	if err != nil {
		t.Fatal(err)
	}
	thin, err := m.CreateVolume(ctx, thinReq("pvc-thin", 4*mib))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := m.CreateSnapshot(ctx, "snap-old", thin.ID)
	if err != nil {
		t.Fatal(err)
	}
	del, err := m.CreateVolume(ctx, req("pvc-del", 4*mib))
	if err != nil {
		t.Fatal(err)
	}
	// A create cut short (still pending): its retry would settle it.
	f.Put(lvm.LV{Name: "pvc-pending", VGName: vg, Size: 4 * mib, Tags: []string{lvmvol.TagVolume, "carve.dev/pending",
		"carve.dev/params=p1", "carve.dev/name=pvc-pending"}})
	f.SetMissingPVs(vg, 1)
	f.Calls = nil
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateVolume", func() error { _, err := m.CreateVolume(ctx, req("pvc-new", 4*mib)); return err }},
		{"CreateVolume (retry of a pending one)", func() error { _, err := m.CreateVolume(ctx, req("pvc-pending", 4*mib)); return err }},
		// Told by the pool's report (lvs), which a thin create reads instead of vgs.
		{"CreateVolume (thin)", func() error { _, err := m.CreateVolume(ctx, thinReq("pvc-new-thin", 4*mib)); return err }},
		{"CreateVolume (thin restore)", func() error {
			r := thinReq("pvc-restored", 4*mib)
			r.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: snap.ID}
			_, err := m.CreateVolume(ctx, r)
			return err
		}},
		{"CreateSnapshot (thick)", func() error { _, err := m.CreateSnapshot(ctx, "snap-thick", thick.ID); return err }},
		{"CreateSnapshot (thin)", func() error { _, err := m.CreateSnapshot(ctx, "snap-thin", thin.ID); return err }},
		{"DeleteVolume", func() error { return m.DeleteVolume(ctx, del.ID) }},
		{"DeleteSnapshot", func() error { return m.DeleteSnapshot(ctx, snap.ID) }},
		{"ExpandVolume", func() error { _, err := m.ExpandVolume(ctx, thick.ID, 8*mib, 0); return err }},
	}
	for _, c := range calls {
		if err := c.call(); !errors.Is(err, lvm.ErrPVMissing) || volume.CodeOf(err) != codes.Unavailable {
			t.Errorf("%s with a PV missing: %v (code %v), want ErrPVMissing, UNAVAILABLE", c.name, err, volume.CodeOf(err))
		}
	}
	// A retry of a create that is done changes nothing: it is answered.
	if _, err := m.CreateVolume(ctx, req("pvc-thick", 4*mib)); err != nil {
		t.Errorf("CreateVolume retry of a settled volume with a PV missing: %v", err)
	}
	for _, c := range f.Calls {
		if c != "GetVG" && c != "GetLV" && c != "ListLVs" && c != "ListVGPVs" {
			t.Errorf("a call on a VG missing a PV ran %s", c)
		}
	}
	f.SetMissingPVs(vg, 0)
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Errorf("%s with the PV back: %v", c.name, err)
		}
	}
}

// The start-up repairs ask lvm2 to repair what interrupted commands left,
// to make the missing device nodes and to release the pools' metadata
// snapshots a killed read left, in every served VG, and a VG they
// cannot do that for does not stop the others.
func TestStartUpRepairsVisitEveryVG(t *testing.T) {
	f := lvmfake.New(100*mib, "vg0", "vg1")
	m := lvmvol.NewManager(lvmvol.Config{LVM: f, Wiper: f, Node: node, VolumeGroups: []string{"vg0", "gone", "vg1"}})
	m.ResumeSuspendedLayers(ctx) // no layers: nothing to do
	m.RepairInterruptedLVM(ctx)
	m.MakeMissingDeviceNodes(ctx)
	m.ReleaseMetadataSnapshots(ctx)
	want := []string{"RepairInterrupted", "RepairInterrupted", "RepairInterrupted", "MakeNodes", "MakeNodes", "MakeNodes",
		"ReleaseMetadataSnaps", "ReleaseMetadataSnaps", "ReleaseMetadataSnaps"}
	if !slices.Equal(f.Calls, want) {
		t.Errorf("calls %v, want %v: each repair for each of the 3 VGs", f.Calls, want)
	}
}

// A thin snapshot's creation time is a tag its lvcreate writes (it is not
// read back): every answer about it, the first, a repeated call's and a
// listing's, gives the same time, the call's own second.
func TestThinSnapshotCreationTimeIsStable(t *testing.T) {
	m, f := newManager(t)
	f.PutThinPool(vg, "pool", 40*mib, 0)
	thin, err := m.CreateVolume(ctx, thinReq("pvc-thin", 4*mib))
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Truncate(time.Second)
	first, err := m.CreateSnapshot(ctx, "snap-1", thin.ID)
	if err != nil {
		t.Fatal(err)
	}
	if first.CreatedAt.Before(before) || first.CreatedAt.After(time.Now()) {
		t.Errorf("created at %v, want the call's time (from %v)", first.CreatedAt, before)
	}
	again, err := m.CreateSnapshot(ctx, "snap-1", thin.ID)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := m.ListSnapshots(ctx, lvm.Fresh)
	if err != nil || len(listed) != 1 {
		t.Fatalf("listed %+v, %v", listed, err)
	}
	for _, s := range []volume.Snapshot{again, listed[0]} {
		if !s.CreatedAt.Equal(first.CreatedAt) || s.Name != "snap-1" || s.SizeBytes != first.SizeBytes || !s.Ready {
			t.Errorf("answered %+v, first %+v", s, first)
		}
	}
}
