package lvmvol_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/metrics"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

func thinReq(name string, size int64) volume.CreateRequest {
	r := req(name, size)
	r.Type = volume.Type{ThinPool: "pool"}
	return r
}

func TestThinVolumes(t *testing.T) {
	m, f := newManager(t)
	f.PutThinPool(vg, "pool", 40*mib, 50) // 20 MiB free
	if _, err := m.CreateVolume(ctx, thinReq("big", 24*mib)); !errors.Is(err, lvm.ErrNoSpace) {
		t.Errorf("thin beyond pool room: %v, want ErrNoSpace", err)
	}
	m = managerOn(f, lvmvol.Config{Overprovision: 2}) // carve restarted with a ratio of 2
	c, err := m.Capacity(ctx, node, volume.OneVG(vg), volume.Type{ThinPool: "pool"})
	if err != nil || c.AvailableBytes != 40*mib {
		t.Errorf("thin capacity = %+v, %v; want 20 MiB free × 2", c, err)
	}
	vol, err := m.CreateVolume(ctx, thinReq("pvc-thin", 24*mib))
	if err != nil {
		t.Fatal(err)
	}
	lv, _ := f.LV(vg, vol.ID.LV)
	if lv.PoolLV != "pool" {
		t.Errorf("thin volume in pool %q", lv.PoolLV)
	}
	if err := m.DeleteVolume(ctx, vol.ID); err != nil {
		t.Fatal(err)
	}
	if len(f.Wiped) != 0 {
		t.Errorf("thin volume wiped %v: the pool zeroes its blocks, a wipe would allocate them all", f.Wiped)
	}
	f.Put(lvm.LV{Name: "nozero", VGName: vg, Size: 8 * mib, Attr: "twi-a-t---", Active: true})
	r := thinReq("pvc-x", 4*mib)
	r.Type.ThinPool = "nozero"
	if _, err := m.CreateVolume(ctx, r); !errors.Is(err, volume.ErrBadPool) {
		t.Errorf("pool without zeroing: %v, want ErrBadPool", err)
	}
	r.Type.ThinPool = "missing"
	if _, err := m.CreateVolume(ctx, r); err == nil {
		t.Error("thin volume in a missing pool created")
	}
}

func TestExpand(t *testing.T) {
	m, f := newManager(t)
	vol, _ := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	got, err := m.ExpandVolume(ctx, vol.ID, 10*mib, 0)
	if err != nil || got.SizeBytes != 12*mib {
		t.Fatalf("expand = %+v, %v; want 12 MiB (10 rounded up)", got, err)
	}
	if again, err := m.ExpandVolume(ctx, vol.ID, 10*mib, 0); err != nil || again.SizeBytes != 12*mib {
		t.Errorf("repeated expand = %+v, %v", again, err)
	}
	if _, err := m.ExpandVolume(ctx, vol.ID, 4*mib, 4*mib); !errors.Is(err, volume.ErrOutOfRange) {
		t.Errorf("shrink: %v, want ErrOutOfRange", err)
	}
	f.Calls = nil
	if _, err := m.ExpandVolume(ctx, vol.ID, 500*mib, 0); !errors.Is(err, lvm.ErrNoSpace) {
		t.Errorf("expand beyond the VG: %v, want ErrNoSpace", err)
	}
	for _, c := range f.Calls {
		if c == "ExtendLV" {
			t.Error("lvextend ran for an expansion that cannot fit")
		}
	}
	if _, err := m.ExpandVolume(ctx, volume.ID{Node: node, VG: vg, LV: "nope"}, 8*mib, 0); !errors.Is(err, volume.ErrVolumeNotFound) {
		t.Errorf("expand missing: %v", err)
	}
}

// thinSnapshotted makes an empty thin pool, a thin volume of 8 MiB in it
// and a snapshot of that volume, "snapshot-1", checked ready.
func thinSnapshotted(t *testing.T) (*lvmvol.Manager, *lvmfake.LVM, volume.Volume, volume.Snapshot) {
	t.Helper()
	m, f := newManager(t)
	f.PutThinPool(vg, "pool", 40*mib, 0)
	vol, err := m.CreateVolume(ctx, thinReq("pvc-src", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := m.CreateSnapshot(ctx, "snapshot-1", vol.ID)
	if err != nil || !snap.Ready || snap.Source != vol.ID || snap.SizeBytes != 8*mib {
		t.Fatalf("thin snapshot = %+v, %v; want ready, of %s, 8 MiB", snap, err, vol.ID)
	}
	return m, f, vol, snap
}

func TestThinSnapshotAndRestore(t *testing.T) {
	m, f, vol, snap := thinSnapshotted(t)
	again, err := m.CreateSnapshot(ctx, "snapshot-1", vol.ID)
	if err != nil || again.ID != snap.ID {
		t.Errorf("repeated CreateSnapshot = %+v, %v", again, err)
	}
	other, _ := m.CreateVolume(ctx, thinReq("pvc-other", 4*mib))
	if _, err := m.CreateSnapshot(ctx, "snapshot-1", other.ID); !errors.Is(err, volume.ErrNameConflict) {
		t.Errorf("same snapshot name, other source: %v, want ErrNameConflict", err)
	}
	if vols, _ := m.ListVolumes(ctx, lvm.Fresh); len(vols) != 2 {
		t.Errorf("snapshots listed as volumes: %+v", vols)
	}
	if err := m.DeleteVolume(ctx, vol.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.GetSnapshot(ctx, lvm.Fresh, snap.ID); err != nil {
		t.Errorf("snapshot gone with its source: %v", err)
	}
	r := thinReq("pvc-restored", 16*mib)
	r.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: snap.ID}
	restored, err := m.CreateVolume(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if restored.SizeBytes != 16*mib || restored.Source == nil || restored.Source.ID != snap.ID {
		t.Errorf("restored = %+v; want 16 MiB from %s", restored, snap.ID)
	}
	lv, _ := f.LV(vg, restored.ID.LV)
	if lv.Origin != snap.ID.LV || lv.Active {
		t.Errorf("restored LV %+v: want an inactive thin snapshot of the snapshot", lv)
	}
	r.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: other.ID}
	if _, err := m.CreateVolume(ctx, r); !errors.Is(err, volume.ErrNameConflict) && !errors.Is(err, volume.ErrSnapshotNotFound) {
		t.Errorf("same volume name, other source: %v", err)
	}
	r.Name, r.Source = "pvc-y", &volume.ContentSource{Kind: volume.SourceSnapshot, ID: volume.ID{Node: node, VG: vg, LV: "snap-nope"}}
	if _, err := m.CreateVolume(ctx, r); !errors.Is(err, volume.ErrSnapshotNotFound) {
		t.Errorf("restore from a missing snapshot: %v, want ErrSnapshotNotFound", err)
	}
	if err := m.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Errorf("second DeleteSnapshot: %v", err)
	}
}

func TestThickSnapshotFreezesAndIsNotReadyAtOnce(t *testing.T) {
	f := lvmfake.New(200*mib, vg)
	// The copy runs until released: the snapshot stays not ready, which
	// is what this test looks at (CreateSnapshot waits its grace first).
	m := managerOn(f, lvmvol.Config{Copier: f})
	release := f.HoldCopies()
	defer release()
	vol, _ := m.CreateVolume(ctx, req("pvc-thick", 16*mib))
	snap, err := m.CreateSnapshot(ctx, "snap-a", vol.ID)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Ready {
		t.Error("thick snapshot ready before its data was copied")
	}
	if _, ok := f.LV(vg, snap.ID.LV+"-frz"); !ok {
		t.Error("no frozen point (COW snapshot) taken at snapshot time")
	}
	if err := m.DeleteVolume(ctx, vol.ID); !errors.Is(err, volume.ErrInUse) {
		t.Errorf("delete a volume being copied: %v, want ErrInUse", err)
	}
	if err := m.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.LV(vg, snap.ID.LV+"-frz"); ok {
		t.Error("frozen point left behind by DeleteSnapshot")
	}
	if lv, _ := f.LV(vg, vol.ID.LV); lv.Active || lv.HasTag("carve.dev/held") {
		t.Errorf("source not released after its snapshot went: %+v", lv)
	}
	if err := m.DeleteVolume(ctx, vol.ID); err != nil {
		t.Errorf("delete after the snapshot went: %v", err)
	}
}

func TestHeldSourceIsNotPublished(t *testing.T) {
	f := lvmfake.New(200*mib, vg)
	m := managerOn(f, lvmvol.Config{Copier: f})
	release := f.HoldCopies()
	defer release()
	vol, _ := m.CreateVolume(ctx, req("pvc-thick", 16*mib))
	if _, err := m.CreateSnapshot(ctx, "snap-a", vol.ID); err != nil {
		t.Fatal(err)
	}
	lv, _ := f.LV(vg, vol.ID.LV)
	if !lv.Active {
		t.Fatal("source of a COW freeze not active: lvm2 needs the origin active")
	}
	got, err := m.GetVolume(ctx, lvm.Fresh, vol.ID)
	if err != nil || got.Published {
		t.Errorf("volume held for a copy reads as published: %+v, %v", got, err)
	}
	if err := m.UnpublishVolume(ctx, vol.ID, node); err != nil {
		t.Errorf("unpublish of a held volume: %v", err)
	}
	if lv, _ := f.LV(vg, vol.ID.LV); !lv.Active {
		t.Error("unpublish deactivated a volume a copy still needs")
	}
	if _, err := m.PublishVolume(ctx, vol.ID, node); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteSnapshot(ctx, snapID(m, t)); err != nil {
		t.Fatal(err)
	}
	if lv, _ := f.LV(vg, vol.ID.LV); !lv.Active {
		t.Error("end of the copy deactivated a volume published meanwhile")
	}
}

func snapID(m *lvmvol.Manager, t *testing.T) volume.ID {
	snaps, err := m.ListSnapshots(ctx, lvm.Fresh)
	if err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots %+v, %v", snaps, err)
	}
	return snaps[0].ID
}

func TestPoolAndRAIDHealth(t *testing.T) {
	m, f := newManager(t)
	f.PutThinPool(vg, "full", 40*mib, 100)
	f.PutThinPool(vg, "busy", 40*mib, 95)
	f.Put(lvm.LV{Name: "t-full", VGName: vg, Size: 8 * mib, PoolLV: "full", Tags: []string{lvmvol.TagVolume}})
	f.Put(lvm.LV{Name: "t-busy", VGName: vg, Size: 8 * mib, PoolLV: "busy", Tags: []string{lvmvol.TagVolume}})
	f.Put(lvm.LV{Name: "r-sync", VGName: vg, Size: 8 * mib, Layout: "raid,raid1", Active: true, SyncPercent: 42,
		Tags: []string{lvmvol.TagVolume}})
	f.Put(lvm.LV{Name: "r-ok", VGName: vg, Size: 8 * mib, Layout: "raid,raid1", Active: true, SyncPercent: 100,
		Tags: []string{lvmvol.TagVolume}})
	want := map[string]string{"t-full": "ThinPoolFull", "t-busy": "ThinPoolNearlyFull", "r-sync": "RAIDSyncing", "r-ok": ""}
	vols, err := m.ListVolumes(ctx, lvm.Fresh)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols {
		got := ""
		if len(v.Health) > 0 {
			got = v.Health[0].Reason
		}
		if got != want[v.ID.LV] {
			t.Errorf("%s: health %+v, want reason %q", v.ID.LV, v.Health, want[v.ID.LV])
		}
		one, err := m.GetVolume(ctx, lvm.Fresh, v.ID)
		if err != nil || len(one.Health) != len(v.Health) {
			t.Errorf("%s: GetVolume health %+v differs from ListVolumes %+v", v.ID.LV, one.Health, v.Health)
		}
	}
}

func TestInactivePoolIsActivatedToReadUsage(t *testing.T) {
	m, f := newManager(t)
	f.Put(lvm.LV{Name: "pool", VGName: vg, Size: 40 * mib, Attr: "twi---tz--", Layout: "thin,pool"})
	c, err := m.Capacity(ctx, node, volume.OneVG(vg), volume.Type{ThinPool: "pool"})
	if err != nil || c.AvailableBytes != 40*mib {
		t.Errorf("capacity of an inactive empty pool = %+v, %v; want 40 MiB", c, err)
	}
}

// A thin restore in the snapshot's own pool takes no room (a thin
// snapshot shares its blocks): a pool with too little room left for a new
// thin volume does not refuse it. A pool whose data is full does, as lvm2
// refuses any new thin LV there (TestThinPoolMetadataLimit).
func TestThinRestoreNeedsNoRoom(t *testing.T) {
	m, f, _, snap := thinSnapshotted(t)
	f.PutThinPool(vg, "pool", 40*mib, 99) // 0.4 MiB free
	if _, err := m.CreateVolume(ctx, thinReq("pvc-new", 8*mib)); !errors.Is(err, lvm.ErrNoSpace) {
		t.Errorf("new thin volume in a nearly full pool: %v, want ErrNoSpace", err)
	}
	r := thinReq("pvc-restored", 8*mib)
	r.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: snap.ID}
	if _, err := m.CreateVolume(ctx, r); err != nil {
		t.Errorf("restore in a nearly full pool: %v, want success", err)
	}
}

// New thin volumes, thin snapshots and thin restores are refused before
// lvcreate (RESOURCE_EXHAUSTED) once the pool's metadata is at lvm2's own
// limit: it keeps 4 MiB of the metadata LV free, a quarter of one smaller
// than 16 MiB (75 %). A thin snapshot needs no data room, but is refused
// in a pool whose data is full, as lvm2 refuses it.
func TestThinPoolMetadataLimit(t *testing.T) {
	f := lvmfake.New(100*mib, vg)
	m := managerOn(f, lvmvol.Config{Overprovision: 10})
	f.PutThinPool(vg, "pool", 40*mib, 0)
	src, err := m.CreateVolume(ctx, thinReq("pvc-src", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := m.CreateSnapshot(ctx, "snap-src", src.ID)
	if err != nil {
		t.Fatal(err)
	}
	restore := thinReq("pvc-restored", 8*mib)
	restore.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: snap.ID}
	for _, tc := range []struct {
		data, metadata float64
		metadataSize   uint64
		refused        bool
	}{
		{10, 74.9, 4 * mib, false},
		{10, 75, 4 * mib, true},
		{10, 75, 0, true}, // size unknown: a quarter
		{10, 93.7, 64 * mib, false},
		{10, 93.75, 64 * mib, true}, // 4 MiB of 64
		{10, 100, 64 * mib, true},
		{100, 10, 64 * mib, true},
	} {
		f.SetPoolUsage(vg, "pool", tc.data, tc.metadata, tc.metadataSize)
		f.Calls = nil
		_, errVol := m.CreateVolume(ctx, thinReq("pvc-new", 4*mib))
		_, errSnap := m.CreateSnapshot(ctx, "snap-new", src.ID)
		_, errRestore := m.CreateVolume(ctx, restore)
		for what, err := range map[string]error{"volume": errVol, "snapshot": errSnap, "restore": errRestore} {
			if tc.refused && (!errors.Is(err, lvm.ErrNoSpace) || volume.CodeOf(err) != codes.ResourceExhausted) {
				t.Errorf("data %.2f%%, metadata %.2f%% of %d: new thin %s: %v, want ErrNoSpace, RESOURCE_EXHAUSTED",
					tc.data, tc.metadata, tc.metadataSize, what, err)
			}
			if !tc.refused && err != nil {
				t.Errorf("data %.2f%%, metadata %.2f%% of %d: new thin %s refused: %v", tc.data, tc.metadata, tc.metadataSize, what, err)
			}
		}
		if tc.refused && (slices.Contains(f.Calls, "CreateLV") || slices.Contains(f.Calls, "CreateThinSnapshot")) {
			t.Errorf("data %.2f%%, metadata %.2f%%: lvcreate ran for a refused thin LV: %v", tc.data, tc.metadata, f.Calls)
		}
		for _, name := range []string{"pvc-new", "pvc-restored"} {
			if lv, ok := f.LV(vg, name); ok {
				if err := m.DeleteVolume(ctx, volume.ID{Node: node, VG: vg, LV: lv.Name}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if snaps, _ := m.ListSnapshots(ctx, lvm.Fresh); len(snaps) > 1 {
			for _, s := range snaps {
				if s.ID != snap.ID {
					if err := m.DeleteSnapshot(ctx, s.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
}

// TestFinishedCopyIsCounted: a thick snapshot's copy adds its bytes to
// carve_copied_bytes_total (and its time to carve_copy_seconds_total),
// from which the benchmark and an operator read the copies' throughput.
func TestFinishedCopyIsCounted(t *testing.T) {
	f := lvmfake.New(200*mib, vg)
	m := managerOn(f, lvmvol.Config{Copier: f})
	before := counterValue(t, "carve_copied_bytes_total")
	vol, _ := m.CreateVolume(ctx, req("pvc-thick", 16*mib))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		snap, err := m.CreateSnapshot(ctx, "snap-a", vol.ID)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("thick snapshot not ready")
		}
	}
	if got := counterValue(t, "carve_copied_bytes_total") - before; got != 16*mib {
		t.Errorf("copied bytes +%v, want %v", got, 16*mib)
	}
}

// counterValue reads counter name from Carve's metrics registry.
func counterValue(t *testing.T, name string) float64 {
	t.Helper()
	if ms := gathered(t, name); len(ms) == 1 {
		return ms[0].GetCounter().GetValue()
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// gathered is the series of metric name in Carve's registry (none before
// its first).
func gathered(t *testing.T, name string) []*dto.Metric {
	t.Helper()
	mfs, err := metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()
		}
	}
	return nil
}
