package lvmvol_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// Each operation's lvm2 runs, pinned: in the test VM a process start costs
// 0.2-1.5 s, so an operation's time is, to first order, the number of
// processes it starts (docs/performance.md). A change that adds a run
// back fails here; one that removes a run updates the figure and says
// why the removal is safe, next to the code.

// runCounter is the Manager's LVM: the fake, with each call counted as
// the lvm2 commands the real lvm.Client runs for it with those arguments.
// lvm's own tests pin every method's command lines (create_test.go,
// snapshot_test.go, client_test.go); runs mirrors them.
//
// Reads under one operation's shared scope (lvm.Shared) count as
// an lvm.Cache runs them: one report of each kind per VG, again after a
// change of the VG. Other reads run lvm2 each time (the fake has no cache
// for queries, and the Manager's operations use none).
type runCounter struct {
	*lvmfake.LVM
	mu   sync.Mutex
	runs map[string]int         // by subcommand: "lvs", "lvcreate", ...
	gen  map[string]int         // VG -> changes so far
	read map[any]map[string]int // scope -> kind+VG -> 1 + gen it was read at
}

func (r *runCounter) ran(subs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range subs {
		r.runs[s]++
	}
}

// report counts a report of kind ("lvs", "vgs", "pvs") of vg, unless
// reads' scope has read it since vg's last change.
func (r *runCounter) report(reads lvm.Reads, kind, vg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	scope := reads.Scope()
	if scope != nil && r.read[scope][kind+vg] == 1+r.gen[vg] {
		return
	}
	r.runs[kind]++
	if scope != nil {
		if r.read[scope] == nil {
			r.read[scope] = map[string]int{}
		}
		r.read[scope][kind+vg] = 1 + r.gen[vg]
	}
}

// change counts a change of vg that runs subs.
func (r *runCounter) change(vg string, subs ...string) {
	r.ran(subs...)
	r.mu.Lock()
	r.gen[vg]++
	r.mu.Unlock()
}

// take returns the runs counted since the last take.
func (r *runCounter) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.runs
	r.runs = map[string]int{}
	return out
}

func (r *runCounter) GetVG(ctx context.Context, reads lvm.Reads, vg string) (lvm.VG, error) {
	r.report(reads, "vgs", vg)
	return r.LVM.GetVG(ctx, reads, vg)
}

func (r *runCounter) ListLVs(ctx context.Context, reads lvm.Reads, vg string) ([]lvm.LV, error) {
	r.report(reads, "lvs", vg)
	return r.LVM.ListLVs(ctx, reads, vg)
}

func (r *runCounter) GetLV(ctx context.Context, reads lvm.Reads, vg, name string) (lvm.LV, error) {
	r.report(reads, "lvs", vg)
	return r.LVM.GetLV(ctx, reads, vg, name)
}

func (r *runCounter) ListVGPVs(ctx context.Context, reads lvm.Reads, vg string) ([]lvm.PV, error) {
	r.report(reads, "pvs", vg)
	return r.LVM.ListVGPVs(ctx, reads, vg)
}

// CreateLV: a vgs without the extent size, lvcreate, an lvs to read back.
func (r *runCounter) CreateLV(ctx context.Context, o lvm.CreateLVOptions) (lvm.LV, error) {
	if o.ExtentSize == 0 {
		r.ran("vgs")
	}
	r.change(o.VG, "lvcreate")
	if !o.SkipReadBack {
		r.ran("lvs")
	}
	return r.LVM.CreateLV(ctx, o)
}

// CheckPlacement: nothing for a linear or thin LV; pvs (and vgs without
// the extent size) for striped and raid1.
func (r *runCounter) CheckPlacement(ctx context.Context, o lvm.CreateLVOptions) error {
	if o.Stripes > 1 || o.Mirrors > 0 {
		if o.ExtentSize == 0 {
			r.ran("vgs")
		}
		r.ran("pvs")
	}
	return r.LVM.CheckPlacement(ctx, o)
}

// RemoveLV lists the VG for dependents, then removes.
func (r *runCounter) RemoveLV(ctx context.Context, vg, name string) error {
	r.ran("lvs")
	r.change(vg, "lvremove")
	return r.LVM.RemoveLV(ctx, vg, name)
}

func (r *runCounter) RemoveLVOf(ctx context.Context, lv lvm.LV) error {
	if lv.IsThinPool() {
		r.ran("lvs")
	}
	r.change(lv.VGName, "lvremove")
	return r.LVM.RemoveLVOf(ctx, lv)
}

// ExtendLV reads the LV, then extends it if it is smaller.
func (r *runCounter) ExtendLV(ctx context.Context, vg, name string, size uint64) error {
	r.ran("lvs")
	if lv, ok := r.LV(vg, name); ok && lv.Size < size {
		r.change(vg, "lvextend")
	}
	return r.LVM.ExtendLV(ctx, vg, name, size)
}

func (r *runCounter) Activate(ctx context.Context, vg, name string) error {
	r.change(vg, "lvchange")
	return r.LVM.Activate(ctx, vg, name)
}

func (r *runCounter) Deactivate(ctx context.Context, vg, name string) error {
	r.change(vg, "lvchange")
	return r.LVM.Deactivate(ctx, vg, name)
}

func (r *runCounter) AddTags(ctx context.Context, vg, name string, tags ...string) error {
	if len(tags) > 0 {
		r.change(vg, "lvchange")
	}
	return r.LVM.AddTags(ctx, vg, name, tags...)
}

func (r *runCounter) RemoveTags(ctx context.Context, vg, name string, tags ...string) error {
	if len(tags) > 0 {
		r.change(vg, "lvchange")
	}
	return r.LVM.RemoveTags(ctx, vg, name, tags...)
}

func (r *runCounter) RetagAndActivate(ctx context.Context, vg, name string, add, remove []string, active bool) error {
	r.change(vg, "lvchange")
	return r.LVM.RetagAndActivate(ctx, vg, name, add, remove, active)
}

// The snapshot calls that look the origin up: lvs, lvcreate, lvs.
func (r *runCounter) CreateThinSnapshot(ctx context.Context, vg, origin, name string, tags ...string) (lvm.LV, error) {
	r.ran("lvs", "lvs")
	r.change(vg, "lvcreate")
	return r.LVM.CreateThinSnapshot(ctx, vg, origin, name, tags...)
}

func (r *runCounter) CreateCOWSnapshot(ctx context.Context, vg, origin, name string, cowSize uint64, tags ...string) (lvm.LV, error) {
	r.ran("lvs", "lvs")
	r.change(vg, "lvcreate")
	return r.LVM.CreateCOWSnapshot(ctx, vg, origin, name, cowSize, tags...)
}

func (r *runCounter) CreateSnapshotOf(ctx context.Context, origin lvm.LV, name string, o lvm.SnapshotOptions) (lvm.LV, error) {
	r.change(origin.VGName, "lvcreate")
	if !o.SkipReadBack {
		r.ran("lvs")
	}
	return r.LVM.CreateSnapshotOf(ctx, origin, name, o)
}

// Zero is the wipe's blkdiscard: not lvm2, counted apart.
func (r *runCounter) Zero(ctx context.Context, device string, offset, length int64) error {
	r.ran("blkdiscard")
	return r.LVM.Zero(ctx, device, offset, length)
}

func newCounted(t *testing.T) (*lvmvol.Manager, *runCounter) {
	t.Helper()
	f := lvmfake.New(200*mib, vg)
	f.PutThinPool(vg, "pool", 100*mib, 0)
	r := &runCounter{LVM: f, runs: map[string]int{}, gen: map[string]int{}, read: map[any]map[string]int{}}
	m := lvmvol.NewManager(lvmvol.Config{LVM: r, Wiper: r, Node: node, VolumeGroups: []string{vg}, Copier: f})
	return m, r
}

// runs renders counts as "lvchange=1 lvs=2", sorted, for messages and
// comparison.
func runs(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
	}
	return strings.Join(parts, " ")
}

func TestLVMRunsPerOperation(t *testing.T) {
	m, r := newCounted(t)
	thick, thin := req("pvc-thick", 8*mib), thinReq("pvc-thin", 8*mib)
	var thickVol, thinVol volume.Volume
	var thinSnap, thickSnap volume.Snapshot
	for _, op := range []struct {
		name string
		do   func() error
		want string // lvm2 runs (and the wipe's blkdiscard), by subcommand
		// was: the same count of the code before the runs were cut, for
		// the record. On real lvm2 the thin snapshot and restore ran one
		// lvchange more than the fake shows (lvm2 activated them).
		was string
	}{
		// vgs (extent size, free space); lvcreate of the active, pending
		// LV (no read-back); lvchange -an; lvchange --deltag pending.
		{"CreateVolume thick", func() (err error) { thickVol, err = m.CreateVolume(ctx, thick); return err },
			"lvchange=2 lvcreate=1 vgs=1", "lvchange=2 lvcreate=1 lvs=2 vgs=1"},
		// The pool's lvs (room, zeroing, extent size, and the VG's
		// missing PVs: no vgs for changeableVG's guard); lvcreate -an
		// with the final tags.
		{"CreateVolume thin", func() (err error) { thinVol, err = m.CreateVolume(ctx, thin); return err },
			"lvcreate=1 lvs=1", "lvchange=2 lvcreate=1 lvs=3 vgs=1"},
		// A retry: lvcreate fails on the name, then the LV is read.
		{"CreateVolume thick again", func() error { _, err := m.CreateVolume(ctx, thick); return err },
			"lvcreate=1 lvs=1 vgs=1", "lvs=1"},
		{"ControllerPublish", func() error { _, err := m.PublishVolume(ctx, thickVol.ID, node); return err },
			"lvchange=1 lvs=1", "lvchange=1 lvs=1"},
		{"node's GetVolume, thick", func() error { _, err := m.GetVolume(ctx, lvm.Fresh, thickVol.ID); return err },
			"lvs=1", "lvs=1"},
		{"node's GetVolume, thin (and its pool)", func() error { _, err := m.GetVolume(ctx, lvm.Fresh, thinVol.ID); return err },
			"lvs=2", "lvs=2"},
		{"ControllerUnpublish", func() error { return m.UnpublishVolume(ctx, thickVol.ID, node) },
			"lvchange=1 lvs=1", "lvchange=1 lvs=1"},
		// lvs; lvcreate -s -an with its creation time as a tag, not read
		// back.
		{"CreateSnapshot thin", func() (err error) { thinSnap, err = m.CreateSnapshot(ctx, "snap-thin", thinVol.ID); return err },
			"lvcreate=1 lvs=1", "lvcreate=1 lvs=4"},
		// One lvs for the snapshot and the pool; lvcreate -s -an with the
		// final tags.
		{"restore thin", func() error {
			rr := thinReq("pvc-restored", 8*mib)
			rr.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: thinSnap.ID}
			_, err := m.CreateVolume(ctx, rr)
			return err
		}, "lvcreate=1 lvs=1", "lvchange=1 lvcreate=1 lvs=6 vgs=1"},
		// Source and name (one lvs), VG; hold (tag and activate in one), the frozen
		// point, the snapshot LV (read back: creation time); the copy
		// job: the frozen point before and after, its removal, the
		// source's release (lvs, -an, --deltag), the snapshot settled
		// (-an, then --deltag copying: see finishSnapshotCopy for why two).
		{"CreateSnapshot thick, copied", func() error {
			s, err := m.CreateSnapshot(ctx, "snap-thick", thickVol.ID)
			thickSnap = s
			if err == nil && !s.Ready {
				err = fmt.Errorf("thick snapshot of 8 MiB not ready in the first call")
			}
			return err
		}, "lvchange=5 lvcreate=2 lvremove=1 lvs=5 vgs=1", "lvchange=7 lvcreate=2 lvremove=1 lvs=15 vgs=1"},
		// A CO's repeat of the call: the source and the snapshot in one
		// lvs.
		{"CreateSnapshot thick again", func() error {
			_, err := m.CreateSnapshot(ctx, "snap-thick", thickVol.ID)
			return err
		}, "lvs=1", "lvs=2"},
		// A ready snapshot goes as a volume does: lvs; the deleting tag
		// and -ay in one lvchange, the wipe, lvremove (thick); lvs,
		// lvremove (thin).
		{"DeleteSnapshot thick", func() error { return m.DeleteSnapshot(ctx, thickSnap.ID) },
			"blkdiscard=1 lvchange=1 lvremove=1 lvs=1", "blkdiscard=1 lvchange=2 lvremove=1 lvs=3"},
		{"DeleteSnapshot thin", func() error { return m.DeleteSnapshot(ctx, thinSnap.ID) },
			"lvremove=1 lvs=1", "lvchange=1 lvremove=1 lvs=3"},
		// lvs (which also tells the VG's missing PVs: no vgs for the
		// guard); the deleting tag and -ay in one lvchange; the wipe;
		// lvremove from the lookup's report.
		{"DeleteVolume thick", func() error { return m.DeleteVolume(ctx, thickVol.ID) },
			"blkdiscard=1 lvchange=1 lvremove=1 lvs=1", "blkdiscard=1 lvchange=2 lvremove=1 lvs=2"},
		// lvs; lvremove: a thin volume needs no mark.
		{"DeleteVolume thin", func() error { return m.DeleteVolume(ctx, thinVol.ID) },
			"lvremove=1 lvs=1", "lvchange=1 lvremove=1 lvs=2"},
		// Not found: the VG is read to tell that from an unreadable VG.
		{"DeleteVolume of a deleted volume", func() error { return m.DeleteVolume(ctx, thinVol.ID) },
			"lvs=1 vgs=1", "lvs=1 vgs=1"},
	} {
		r.take()
		if err := op.do(); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		if got := runs(r.take()); got != op.want {
			t.Errorf("%s ran %s, want %s (it ran %s before lvm2 runs were cut)", op.name, got, op.want, op.was)
		}
	}
}
