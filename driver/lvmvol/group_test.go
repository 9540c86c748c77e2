package lvmvol_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// failingSnapshots logs lvm2's snapshots like snapshotLog, and fails the
// snapshot of the volume named failOn: a window cut short.
type failingSnapshots struct {
	snapshotLog
	failOn *string
}

func (s failingSnapshots) CreateSnapshotOf(ctx context.Context, origin lvm.LV, name string, o lvm.SnapshotOptions) (lvm.LV, error) {
	if origin.Name == *s.failOn {
		return lvm.LV{}, errors.New("cut")
	}
	return s.snapshotLog.CreateSnapshotOf(ctx, origin, name, o)
}

// groupFixture: a published thin volume and a published thick one, each
// with a layer (fakeLayers), under a Manager that logs.
func groupFixture(t *testing.T) (*lvmvol.Manager, *lvmfake.LVM, *[]string, *string, []volume.ID) {
	t.Helper()
	return groupVolumes(t, true)
}

// groupVolumes is groupFixture with the volumes published or not.
func groupVolumes(t *testing.T, published bool) (*lvmvol.Manager, *lvmfake.LVM, *[]string, *string, []volume.ID) {
	t.Helper()
	var log []string
	failOn := new(string)
	f := lvmfake.New(100*mib, vg)
	f.PutThinPool(vg, "pool", 40*mib, 0)
	m := lvmvol.NewManager(lvmvol.Config{LVM: failingSnapshots{snapshotLog{f, &log}, failOn}, Wiper: f, Node: node, VolumeGroups: []string{vg},
		Copier: f, Layers: fakeLayers{log: &log}})
	var ids []volume.ID
	for _, r := range []volume.CreateRequest{thinReq("pvc-thin", 4*mib), req("pvc-thick", 4*mib)} {
		v, err := m.CreateVolume(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if published {
			if _, err := m.PublishVolume(ctx, v.ID, node); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, v.ID)
	}
	return m, f, &log, failOn, ids
}

// awaitGroup calls again, as the CO does, until the group is ready.
func awaitGroup(t *testing.T, m *lvmvol.Manager, name string, ids []volume.ID) volume.GroupSnapshot {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		g, err := m.CreateGroupSnapshot(ctx, name, ids)
		if err != nil {
			t.Fatal(err)
		}
		if g.Ready {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s not ready: %+v", name, g)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGroupSnapshotOneWindow: both layers are suspended before the first
// instant and resumed after the last; each member names its group and its
// source; a repeated call takes no new instant; the members cannot be
// deleted alone, the group goes whole.
func TestGroupSnapshotOneWindow(t *testing.T) {
	m, f, log, _, ids := groupFixture(t)
	*log = nil
	g := awaitGroup(t, m, "group-1", ids)
	want := []string{"suspend vg0-pvc--thin-carve", "suspend vg0-pvc--thick-carve",
		"snapshot, skipping suspended", "snapshot, skipping suspended",
		"resume vg0-pvc--thin-carve", "resume vg0-pvc--thick-carve"}
	if !slices.Equal((*log)[:min(len(want), len(*log))], want) {
		t.Fatalf("window %q, want %q first", *log, want)
	}
	if len(g.Snapshots) != 2 || g.CreatedAt.IsZero() || !strings.HasPrefix(g.ID.LV, "group-") {
		t.Fatalf("group %+v", g)
	}
	for i, s := range g.Snapshots {
		if s.Group != g.ID || s.Source != ids[i] || !s.Ready {
			t.Errorf("member %d: %+v", i, s)
		}
	}
	*log = nil
	again := awaitGroup(t, m, "group-1", ids)
	if len(*log) != 0 || again.ID != g.ID || again.Snapshots[0].ID != g.Snapshots[0].ID {
		t.Fatalf("repeated call: %q, %+v", *log, again)
	}
	if got, err := m.GetGroupSnapshot(ctx, lvm.Fresh, g.ID); err != nil || len(got.Snapshots) != 2 || !got.Ready {
		t.Fatalf("GetGroupSnapshot = %+v, %v", got, err)
	}
	if err := m.DeleteSnapshot(ctx, g.Snapshots[0].ID); !errors.Is(err, volume.ErrInvalidArgument) {
		t.Fatalf("DeleteSnapshot of a member: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := m.CreateGroupSnapshot(ctx, "group-1", ids[:1]); !errors.Is(err, volume.ErrNameConflict) {
		t.Fatalf("same name, other volumes: %v, want ALREADY_EXISTS", err)
	}
	for range 2 {
		if err := m.DeleteGroupSnapshot(ctx, g.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.GetGroupSnapshot(ctx, lvm.Fresh, g.ID); !errors.Is(err, volume.ErrSnapshotNotFound) {
		t.Fatalf("GetGroupSnapshot after delete: %v", err)
	}
	if lvs, _ := f.ListLVs(ctx, lvm.Fresh, vg); len(lvs) != 3 { // the pool and the two volumes
		t.Fatalf("LVs left: %v", lvs)
	}
}

// TestGroupSnapshotWindowCutShortIsCutAgain: a window that took the thin
// volume's instant and failed at the thick one's leaves an instant that is
// not the group's; the retry removes it and cuts a whole new window.
func TestGroupSnapshotWindowCutShortIsCutAgain(t *testing.T) {
	m, f, log, failOn, ids := groupFixture(t)
	*failOn = "pvc-thick"
	if _, err := m.CreateGroupSnapshot(ctx, "group-1", ids); err == nil {
		t.Fatal("a window cut short succeeded")
	}
	*failOn = ""
	*log = nil
	g := awaitGroup(t, m, "group-1", ids)
	snaps := slices.DeleteFunc(slices.Clone(*log), func(s string) bool { return !strings.HasPrefix(s, "snapshot") })
	if len(snaps) != 2 {
		t.Fatalf("retry took %d instants (%q), want both again", len(snaps), *log)
	}
	lvs, _ := f.ListLVs(ctx, lvm.Fresh, vg)
	if len(lvs) != 5 || len(g.Snapshots) != 2 {
		t.Fatalf("after the retry: %d LVs (%v), group %+v", len(lvs), lvs, g)
	}
}

// TestGroupSnapshotSources: the volumes must share this node and a VG,
// each named once.
func TestGroupSnapshotSources(t *testing.T) {
	m, _, _, _, ids := groupFixture(t)
	other := ids[0]
	other.Node = "node-b"
	otherVG := ids[0]
	otherVG.VG = "vg1"
	for _, tc := range []struct {
		ids  []volume.ID
		want error
	}{
		{nil, volume.ErrInvalidArgument},
		{[]volume.ID{ids[0], ids[0]}, volume.ErrInvalidArgument},
		{[]volume.ID{ids[0], other}, volume.ErrFailedPrecondition},
		{[]volume.ID{ids[0], otherVG}, volume.ErrFailedPrecondition},
	} {
		if _, err := m.CreateGroupSnapshot(ctx, "g", tc.ids); !errors.Is(err, tc.want) {
			t.Errorf("sources %v: %v, want %v", tc.ids, err, tc.want)
		}
	}
}

// TestGroupSnapshotCopyFailureIsReportedOnce: a thick member's copy that
// fails is the call's error once; the next call copies again, and the
// group becomes ready.
func TestGroupSnapshotCopyFailureIsReportedOnce(t *testing.T) {
	m, f, _, _, ids := groupFixture(t)
	broken := errors.New("read error")
	f.Fail = func(call string) error {
		if call == "Copy" {
			return broken
		}
		return nil
	}
	if _, err := m.CreateGroupSnapshot(ctx, "group-1", ids); !errors.Is(err, broken) {
		t.Fatalf("a failed copy: %v, want it reported", err)
	}
	f.Fail = nil
	if g := awaitGroup(t, m, "group-1", ids); len(g.Snapshots) != 2 {
		t.Fatalf("group %+v", g)
	}
}

// TestGroupSnapshotRefusesAVolumeInUseWithoutALayer: a volume open with no
// layer (a raw block volume in a pod) cannot be held with the others: the
// group is FAILED_PRECONDITION, no instant taken; one nothing has open
// needs no holding.
func TestGroupSnapshotRefusesAVolumeInUseWithoutALayer(t *testing.T) {
	_, f, log, _, ids := groupFixture(t)
	var none []string
	// The same volumes, under a Manager whose node finds no layer.
	m := lvmvol.NewManager(lvmvol.Config{LVM: snapshotLog{f, log}, Wiper: f, Node: node, VolumeGroups: []string{vg}, Copier: f,
		Layers: fakeLayers{log: &none, none: true}})
	lv, _ := f.LV(vg, ids[0].LV) // the thin one: Put takes no room for it
	lv.Open = true
	f.Put(lv)
	*log = nil
	if _, err := m.CreateGroupSnapshot(ctx, "group-1", ids); !errors.Is(err, volume.ErrFailedPrecondition) {
		t.Fatalf("a volume in use without a layer: %v, want FAILED_PRECONDITION", err)
	}
	if len(*log) != 0 || len(none) != 0 {
		t.Fatalf("refused, yet did %q %q", *log, none)
	}
	lv.Open = false
	f.Put(lv)
	if g := awaitGroup(t, m, "group-1", ids); len(g.Snapshots) != 2 {
		t.Fatalf("group %+v", g)
	}
}

// TestGroupSnapshotFailedWindowLeavesNoHold: an unpublished thick source is
// held (activated) for its frozen point. A window that fails lets it go at
// once when it has no frozen point yet, and at the group's deletion when
// it has one: a CO that deletes the group instead of retrying leaves no
// volume active.
func TestGroupSnapshotFailedWindowLeavesNoHold(t *testing.T) {
	for _, tc := range []struct {
		name       string
		thickFirst bool
	}{{"cut before its instant", false}, {"cut after its instant", true}} {
		t.Run(tc.name, func(t *testing.T) {
			m, f, _, failOn, ids := groupVolumes(t, false)
			*failOn = "pvc-thin"
			if tc.thickFirst {
				slices.Reverse(ids)
			}
			if _, err := m.CreateGroupSnapshot(ctx, "group-1", ids); err == nil {
				t.Fatal("a window cut short succeeded")
			}
			thick, _ := f.LV(vg, "pvc-thick")
			// Held while its frozen point is there, for the retry to drop.
			if held := thick.Active && thick.HasTag("carve.dev/held"); held != tc.thickFirst {
				t.Errorf("after the cut window: thick source active %v, tags %v", thick.Active, thick.Tags)
			}
			if err := m.DeleteGroupSnapshot(ctx, volume.ID{Node: node, VG: vg, LV: volume.GroupSnapshotName("group-1")}); err != nil {
				t.Fatal(err)
			}
			thick, _ = f.LV(vg, "pvc-thick")
			if thick.Active || thick.HasTag("carve.dev/held") {
				t.Errorf("after the group's deletion: thick source active %v, tags %v", thick.Active, thick.Tags)
			}
			if lvs, _ := f.ListLVs(ctx, lvm.Fresh, vg); len(lvs) != 3 {
				t.Errorf("LVs left: %v, want the pool and the two volumes", lvs)
			}
		})
	}
}
