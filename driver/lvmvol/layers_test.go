package lvmvol_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/mapper"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// fakeLayers plays a node's layers: every LV has one (none: no LV has);
// it records what is done to them, in order, into the shared log.
type fakeLayers struct {
	log         *[]string
	failSuspend error
	none        bool
}

func (l fakeLayers) Find(vg, lv string, _ uint64) (mapper.Device, bool, error) {
	name, err := mapper.Name(vg, lv, mapper.LinearLayer)
	return mapper.Device{Name: name}, !l.none, err
}

func (l fakeLayers) Suspend(_ context.Context, d mapper.Device) error {
	*l.log = append(*l.log, "suspend "+d.Name)
	return l.failSuspend
}

func (l fakeLayers) Resume(_ context.Context, d mapper.Device) error {
	*l.log = append(*l.log, "resume "+d.Name)
	return nil
}

func (l fakeLayers) Remove(_ context.Context, vg, lv string, _ uint64) error {
	*l.log = append(*l.log, "remove "+vg+"/"+lv)
	return nil
}

func (l fakeLayers) ResumeLeftovers(context.Context) ([]string, error) { return nil, nil }

// snapshotLog records lvm2's snapshots into the same log, and whether
// each ran with lvm2's scan told to skip suspended devices.
type snapshotLog struct {
	*lvmfake.LVM
	log *[]string
}

func (s snapshotLog) CreateSnapshotOf(ctx context.Context, origin lvm.LV, name string, o lvm.SnapshotOptions) (lvm.LV, error) {
	*s.log = append(*s.log, map[bool]string{true: "snapshot, skipping suspended", false: "snapshot"}[o.SuspendedLayers])
	return s.LVM.CreateSnapshotOf(ctx, origin, name, o)
}

// TestASnapshotHoldsThePublishedVolumesLayer: a published volume's
// snapshot (thin: lvm2's; thick: the frozen point the copy reads) is taken
// while its layer is suspended, lvm2 told to skip suspended devices, and
// the layer resumed after; an unpublished volume has no layer to hold. A
// suspend that fails fails the snapshot, with no lvm2 command.
func TestASnapshotHoldsThePublishedVolumesLayer(t *testing.T) {
	for _, thin := range []bool{false, true} {
		t.Run(map[bool]string{false: "thick", true: "thin"}[thin], func(t *testing.T) {
			var log []string
			f := lvmfake.New(100*mib, vg)
			f.PutThinPool(vg, "pool", 40*mib, 0)
			layers := &fakeLayers{log: &log}
			m := lvmvol.NewManager(lvmvol.Config{LVM: snapshotLog{f, &log}, Wiper: f, Node: node, VolumeGroups: []string{vg}, Copier: f, Layers: layers})
			r := req("pvc-src", 4*mib)
			if thin {
				r = thinReq("pvc-src", 4*mib)
			}
			vol, err := m.CreateVolume(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.CreateSnapshot(ctx, "snap-unpublished", vol.ID); err != nil {
				t.Fatal(err)
			}
			if want := []string{"snapshot"}; !slices.Equal(log, want) {
				t.Fatalf("snapshot of an unpublished volume: %q, want %q", log, want)
			}
			if _, err := m.PublishVolume(ctx, vol.ID, node); err != nil {
				t.Fatal(err)
			}
			log = nil
			if _, err := m.CreateSnapshot(ctx, "snap-published", vol.ID); err != nil {
				t.Fatal(err)
			}
			layer := "vg0-pvc--src-carve"
			if want := []string{"suspend " + layer, "snapshot, skipping suspended", "resume " + layer}; !slices.Equal(log[:min(3, len(log))], want) {
				t.Fatalf("snapshot of a published volume: %q, want %q first", log, want)
			}

			log = nil
			broken := errors.New("suspend failed")
			layers.failSuspend = broken
			if _, err := m.CreateSnapshot(ctx, "snap-3", vol.ID); !errors.Is(err, broken) {
				t.Fatalf("snapshot with a failing suspend: %v, want it", err)
			}
			if want := []string{"suspend " + layer}; !slices.Equal(log, want) { // mapper.Linear resumes it
				t.Fatalf("snapshot with a failing suspend: %q, want %q", log, want)
			}
		})
	}
}
