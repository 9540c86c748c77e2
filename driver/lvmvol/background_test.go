package lvmvol_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// backgroundManager is the node agent's Manager over the fake: long data
// work in the background after a short grace, copies by the fake.
func backgroundManager(t *testing.T, f *lvmfake.LVM) *lvmvol.Manager {
	t.Helper()
	return managerOn(f, background(f))
}

// background is the node agent's configuration, with copies by c.
func background(c lvmvol.Copier) lvmvol.Config {
	return lvmvol.Config{Copier: c, BackgroundDataWork: true, DataGrace: 20 * time.Millisecond}
}

func cloneReq(name string, of volume.ID) volume.CreateRequest {
	r := req(name, 8*mib)
	r.Source = &volume.ContentSource{Kind: volume.SourceVolume, ID: of}
	return r
}

// pending asserts that err says data work runs, of that kind.
func pending(t *testing.T, what string, err error, work string) {
	t.Helper()
	var p *volume.PendingError
	if !errors.Is(err, volume.ErrDataPending) || !errors.As(err, &p) || p.Work != work {
		t.Fatalf("%s: %v, want a pending %s", what, err, work)
	}
}

// until calls fn until it stops answering ErrDataPending.
func until(t *testing.T, fn func() error) error {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if err := fn(); !errors.Is(err, volume.ErrDataPending) {
			return err
		}
	}
	t.Fatal("data work still pending after 5 s")
	return nil
}

// A clone by copy answers at once that its copy runs; a retry joins the
// running copy instead of starting a second; once the copy is done, the
// next call settles the volume.
func TestBackgroundCopyRetryJoins(t *testing.T) {
	f := lvmfake.New(100*mib, vg)
	m := backgroundManager(t, f)
	src, err := m.CreateVolume(ctx, req("pvc-src", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	release := f.HoldCopies()
	defer release()
	copies := jobsGauge(t, "copy")
	start := time.Now()
	_, err = m.CreateVolume(ctx, cloneReq("pvc-clone", src.ID))
	pending(t, "clone while its copy runs", err, "copy")
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the call waited %v for a copy it should leave in the background", took)
	}
	id := volume.ID{Node: node, VG: vg, LV: "pvc-clone"}
	if _, err := m.GetVolume(ctx, lvm.Fresh, id); !errors.Is(err, volume.ErrVolumeNotFound) {
		t.Errorf("a volume still being copied is visible: %v", err)
	}
	_, err = m.CreateVolume(ctx, cloneReq("pvc-clone", src.ID))
	pending(t, "retry while the copy runs", err, "copy")
	if n := len(f.CopiedRanges()); n != 1 {
		t.Fatalf("%d copies after a retry, want the retry to join the first", n)
	}
	if got := jobsGauge(t, "copy"); got != copies+1 {
		t.Errorf("carve_background_jobs{work=\"copy\"} %v while the copy runs, want %v", got, copies+1)
	}

	release()
	var vol volume.Volume
	err = until(t, func() (err error) {
		vol, err = m.CreateVolume(ctx, cloneReq("pvc-clone", src.ID))
		return err
	})
	if err != nil || vol.ID != id || vol.Published {
		t.Fatalf("clone after its copy: %+v, %v", vol, err)
	}
	if n := len(f.CopiedRanges()); n != 1 {
		t.Errorf("%d copies, want 1", n)
	}
	if got := jobsGauge(t, "copy"); got != copies {
		t.Errorf("carve_background_jobs{work=\"copy\"} %v after the copy, want %v", got, copies)
	}
	if _, ok := f.LV(vg, "pvc-clone-frz"); ok {
		t.Error("frozen point left after the copy")
	}
	if lv, _ := f.LV(vg, "pvc-src"); lv.Active || lv.HasTag("carve.dev/held") {
		t.Errorf("source still held after the copy: %+v", lv)
	}
}

// Deleting a volume whose copy runs stops the copy, drops the frozen point
// (releasing the source) and removes the LV.
func TestDeleteStopsACopyIntoTheVolume(t *testing.T) {
	f := lvmfake.New(100*mib, vg)
	m := backgroundManager(t, f)
	src, err := m.CreateVolume(ctx, req("pvc-src", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	release := f.HoldCopies()
	defer release()
	_, err = m.CreateVolume(ctx, cloneReq("pvc-clone", src.ID))
	pending(t, "clone", err, "copy")
	id := volume.ID{Node: node, VG: vg, LV: "pvc-clone"}
	// The copy is held until the test ends: the delete must stop it.
	if err := until(t, func() error { return m.DeleteVolume(ctx, id) }); err != nil {
		t.Fatalf("delete during a copy: %v", err)
	}
	if _, ok := f.LV(vg, "pvc-clone"); ok {
		t.Error("LV left after delete")
	}
	if _, ok := f.LV(vg, "pvc-clone-frz"); ok {
		t.Error("frozen point left after the delete stopped the copy")
	}
	if lv, _ := f.LV(vg, "pvc-src"); lv.Active || lv.HasTag("carve.dev/held") {
		t.Errorf("source still held: %+v", lv)
	}
	if err := m.DeleteVolume(ctx, src.ID); err != nil {
		t.Errorf("delete the source after its clone went: %v", err)
	}
}

// dying is a copier whose first copy records progress halfway and then
// fails, as a process killed mid-copy would leave it; later ones copy.
type dying struct {
	*lvmfake.LVM
	mu   sync.Mutex
	died bool
}

func (d *dying) Copy(ctx context.Context, src, dst string, from, size int64, checkpoint lvmvol.Checkpoint) error {
	d.mu.Lock()
	first := !d.died
	d.died = true
	d.mu.Unlock()
	if !first {
		return d.LVM.Copy(ctx, src, dst, from, size, checkpoint)
	}
	if err := checkpoint(size/2, func() error { return nil }); err != nil {
		return err
	}
	return errors.New("killed")
}

// A failed copy is reported once (not retried silently for ever); the
// next call, even by a new process, resumes where the progress record
// says.
func TestFailedCopyIsReportedThenResumedByANewManager(t *testing.T) {
	f := lvmfake.New(100*mib, vg)
	m := managerOn(f, background(&dying{LVM: f}))
	m.SetDataWorkSteps(4*mib, 0) // record progress at every checkpoint
	src, err := m.CreateVolume(ctx, req("pvc-src", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	err = until(t, func() error {
		_, err := m.CreateVolume(ctx, cloneReq("pvc-clone", src.ID))
		return err
	})
	if err == nil || errors.Is(err, volume.ErrDataPending) {
		t.Fatalf("a failed copy: %v, want its error", err)
	}

	restarted := backgroundManager(t, f)
	var vol volume.Volume
	err = until(t, func() (err error) {
		vol, err = restarted.CreateVolume(ctx, cloneReq("pvc-clone", src.ID))
		return err
	})
	if err != nil {
		t.Fatalf("resumed copy: %v", err)
	}
	copied := f.CopiedRanges()
	if len(copied) != 1 || copied[0].Offset != 4*mib {
		t.Errorf("copies %+v, want one resumed at 4 MiB", copied)
	}
	if lv, _ := f.LV(vg, vol.ID.LV); lv.HasTag("carve.dev/copying") {
		t.Errorf("clone still marked copying: %+v", lv)
	}
}

// gatedWiper zeroes through the fake once released.
type gatedWiper struct {
	*lvmfake.LVM
	gate  chan struct{}
	mu    sync.Mutex
	calls int
}

func (w *gatedWiper) Zero(ctx context.Context, device string, offset, length int64) error {
	w.mu.Lock()
	w.calls++
	w.mu.Unlock()
	select {
	case <-w.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return w.LVM.Zero(ctx, device, offset, length)
}

// A delete whose wipe takes long answers that the wipe runs; retries, and a
// create of the same name, join it; the LV goes once it is done.
func TestBackgroundWipe(t *testing.T) {
	f := lvmfake.New(100*mib, vg)
	w := &gatedWiper{LVM: f, gate: make(chan struct{})}
	m := lvmvol.NewManager(lvmvol.Config{LVM: f, Wiper: w, Node: node, VolumeGroups: []string{vg},
		BackgroundDataWork: true, DataGrace: 20 * time.Millisecond})
	vol, err := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	wipes := jobsGauge(t, "wipe")
	pending(t, "delete", m.DeleteVolume(ctx, vol.ID), "wipe")
	pending(t, "delete again", m.DeleteVolume(ctx, vol.ID), "wipe")
	if got := jobsGauge(t, "wipe"); got != wipes+1 {
		t.Errorf("carve_background_jobs{work=\"wipe\"} %v while the wipe runs, want %v", got, wipes+1)
	}
	_, err = m.CreateVolume(ctx, req("pvc-1", 8*mib))
	pending(t, "create of a name being deleted", err, "wipe")
	w.mu.Lock()
	calls := w.calls
	w.mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d wipes started, want one joined by the retries", calls)
	}
	close(w.gate)
	if err := until(t, func() error { return m.DeleteVolume(ctx, vol.ID) }); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.LV(vg, "pvc-1"); ok {
		t.Error("LV left after the wipe")
	}
	if got := jobsGauge(t, "wipe"); got != wipes {
		t.Errorf("carve_background_jobs{work=\"wipe\"} %v after the wipe, want %v", got, wipes)
	}
}

// jobsGauge reads carve_background_jobs of work (0 before any job of it).
func jobsGauge(t *testing.T, work string) float64 {
	t.Helper()
	for _, m := range gathered(t, "carve_background_jobs") {
		if m.GetLabel()[0].GetValue() == work {
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// Standalone mode (no BackgroundDataWork) still makes a clone in one call.
// standaloneWithSource is standalone mode's Manager (no background data
// work) over a fake of vgSize bytes that copies, with a thick volume to
// copy from.
func standaloneWithSource(t *testing.T, vgSize uint64) (*lvmvol.Manager, *lvmfake.LVM, volume.Volume) {
	t.Helper()
	f := lvmfake.New(vgSize, vg)
	m := managerOn(f, lvmvol.Config{Copier: f})
	src, err := m.CreateVolume(ctx, req("pvc-src", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	return m, f, src
}

func TestBlockingCloneCompletesInOneCall(t *testing.T) {
	m, f, src := standaloneWithSource(t, 100*mib)
	release := f.HoldCopies()
	go func() { time.Sleep(100 * time.Millisecond); release() }()
	if vol, err := m.CreateVolume(ctx, cloneReq("pvc-clone", src.ID)); err != nil || vol.ID.LV != "pvc-clone" {
		t.Fatalf("standalone clone: %+v, %v; want it made in one call", vol, err)
	}
}

// publishedWithSnapshotCopy makes a published thick volume and starts a
// thick snapshot of it, whose copy reads the volume's frozen point.
func publishedWithSnapshotCopy(t *testing.T, f *lvmfake.LVM, m *lvmvol.Manager) volume.Volume {
	t.Helper()
	vol, err := m.CreateVolume(ctx, req("pvc-src", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.PublishVolume(ctx, vol.ID, node); err != nil {
		t.Fatal(err)
	}
	// Its copy runs, or (failFirstCopy) failed and is this call's error.
	if snap, err := m.CreateSnapshot(ctx, "snap-1", vol.ID); snap.Ready {
		t.Fatalf("thick snapshot: %+v, %v; want it made and its copy running or failed", snap, err)
	}
	return vol
}

// snapshotReady repeats CreateSnapshot, as the CO does, until the snapshot
// is ready or the call fails.
func snapshotReady(t *testing.T, m *lvmvol.Manager, of volume.ID) (volume.Snapshot, error) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		snap, err := m.CreateSnapshot(ctx, "snap-1", of)
		if err != nil || snap.Ready {
			return snap, err
		}
	}
	t.Fatal("snapshot not ready after 5 s")
	return volume.Snapshot{}, nil
}

// snapshotCopiedAndReleased waits for the snapshot and checks that the
// copy left the unpublished volume inactive and no longer held.
func snapshotCopiedAndReleased(t *testing.T, f *lvmfake.LVM, m *lvmvol.Manager, vol volume.Volume) {
	t.Helper()
	snap, err := snapshotReady(t, m, vol.ID)
	if err != nil || !snap.Ready {
		t.Fatalf("snapshot after an unpublish during its copy: %+v, %v", snap, err)
	}
	if lv, _ := f.LV(vg, vol.ID.LV); lv.Active || lv.HasTag("carve.dev/held") {
		t.Errorf("volume unpublished during the copy is still active or held after it: %+v", lv)
	}
}

// The upstream suite's "volume and restored snapshot" spec: a thick
// snapshot's copy runs while the volume is unpublished (its pod went).
// Deactivating the volume then failed (the copy holds the frozen point
// open), so the detach waited for the whole copy.
func TestUnpublishWhileASnapshotCopyReadsTheVolume(t *testing.T) {
	f := lvmfake.New(100*mib, vg)
	m := backgroundManager(t, f)
	release := f.HoldCopies()
	defer release()
	vol := publishedWithSnapshotCopy(t, f, m)
	if err := m.UnpublishVolume(ctx, vol.ID, node); err != nil {
		t.Fatalf("unpublish while a copy reads the volume: %v", err)
	}
	if v, err := m.GetVolume(ctx, lvm.Fresh, vol.ID); err != nil || v.Published {
		t.Errorf("volume after the unpublish: %+v, %v; want it unpublished", v, err)
	}
	release()
	snapshotCopiedAndReleased(t, f, m, vol)
}

// failFirstCopy makes the fake's first copy fail, as a process killed
// before its copy began would leave the frozen point uncopied.
func failFirstCopy(f *lvmfake.LVM) {
	var once sync.Once
	f.Fail = func(call string) (err error) {
		if call == "Copy" {
			once.Do(func() { err = errors.New("killed") })
		}
		return err
	}
}

// The same unpublish between the frozen point and its copy (here, a first
// copy that failed): deactivating the volume took the frozen point down,
// and lvm2 refuses to activate a COW snapshot without its origin, so the
// snapshot never became ready until the volume was published again.
func TestUnpublishBetweenFreezeAndCopy(t *testing.T) {
	f := lvmfake.New(100*mib, vg)
	m := backgroundManager(t, f)
	failFirstCopy(f)
	// CreateSnapshot waits for the first copy (copyGrace), which fails at
	// once: the frozen point stays, for the CO's next call to copy.
	vol := publishedWithSnapshotCopy(t, f, m)
	if _, ok := f.LV(vg, volume.SnapshotLVName("snap-1")+"-frz"); !ok {
		t.Fatal("no frozen point after the failed copy")
	}
	if err := m.UnpublishVolume(ctx, vol.ID, node); err != nil {
		t.Fatalf("unpublish with a frozen point: %v", err)
	}
	snapshotCopiedAndReleased(t, f, m, vol)
}

// An unpublish that looked before the frozen point existed deactivates the
// volume, and the frozen point with it, after the freeze (the two run side
// by side in the agent; seen in the upstream suite's run). The copy holds
// the volume again.
func TestCopyHoldsAVolumeDeactivatedAfterItsFreeze(t *testing.T) {
	f := lvmfake.New(100*mib, vg)
	m := backgroundManager(t, f)
	failFirstCopy(f)
	vol := publishedWithSnapshotCopy(t, f, m)
	// The racing unpublish's lvchange -an, after the freeze.
	if err := f.Deactivate(ctx, vg, vol.ID.LV); err != nil {
		t.Fatal(err)
	}
	snapshotCopiedAndReleased(t, f, m, vol)
}

// A restore reads its snapshot active and leaves it inactive, also when it
// finds the snapshot active: a try cut short between activating it and
// deactivating it leaves it so, and the retry must end as one
// uninterrupted restore does (the crash suite's CreateVolume/restore-thick).
func TestRestoreLeavesItsSnapshotInactive(t *testing.T) {
	m, f, src := standaloneWithSource(t, 200*mib)
	snap, err := snapshotReady(t, m, src.ID)
	if err != nil || !snap.Ready {
		t.Fatalf("snapshot: %+v, %v", snap, err)
	}
	for i, found := range []bool{false, true} {
		if found {
			if err := f.Activate(ctx, vg, snap.ID.LV); err != nil {
				t.Fatal(err)
			}
		}
		r := req(fmt.Sprintf("pvc-restored-%d", i), 8*mib)
		r.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: snap.ID}
		if _, err := m.CreateVolume(ctx, r); err != nil {
			t.Fatal(err)
		}
		if lv, _ := f.LV(vg, snap.ID.LV); lv.Active {
			t.Errorf("snapshot found active %v: left active by the restore", found)
		}
	}
}

// A thick snapshot whose copy fails is the caller's error, once, and never
// ready; the next call copies again, from where the record says, and the
// snapshot is ready. Before, a failed copy answered ready_to_use=false
// with no error, every time: to the CO, a copy running for ever.
func TestFailedSnapshotCopyIsReportedThenRetried(t *testing.T) {
	f := lvmfake.New(100*mib, vg)
	m := managerOn(f, lvmvol.Config{Copier: &dying{LVM: f}})
	m.SetDataWorkSteps(4*mib, 0)
	src, err := m.CreateVolume(ctx, req("pvc-src", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := m.CreateSnapshot(ctx, "snap-1", src.ID)
	if err == nil || snap.Ready {
		t.Fatalf("a snapshot whose copy failed: %+v, %v; want its error, not ready", snap, err)
	}
	if snaps, _ := m.ListSnapshots(ctx, lvm.Fresh); len(snaps) != 1 || snaps[0].Ready {
		t.Fatalf("snapshots after the failed copy: %+v; want one, not ready", snaps)
	}
	snap, err = m.CreateSnapshot(ctx, "snap-1", src.ID)
	if err != nil || !snap.Ready {
		t.Fatalf("retry after the failed copy: %+v, %v; want ready", snap, err)
	}
	if copied := f.CopiedRanges(); len(copied) != 1 || copied[0].Offset != 4*mib {
		t.Errorf("copies %+v, want one resumed at 4 MiB", copied)
	}
}

// A thick snapshot is ready only once inactive: its copy deactivates it
// before it drops the copying tag, so an end cut short in between (here, a
// failed deactivation) leaves a snapshot still copying, which the next call
// finishes. The one lvchange that did both committed the tag first: the
// soak's kill inside it left a ready snapshot active for good.
func TestAReadySnapshotIsInactive(t *testing.T) {
	m, f, src := standaloneWithSource(t, 200*mib)
	// Published, the source stays active after the copy: the one
	// deactivation is the snapshot's.
	if _, err := m.PublishVolume(ctx, src.ID, node); err != nil {
		t.Fatal(err)
	}
	f.Fail = func(call string) error {
		if call == "Deactivate" {
			return errors.New("killed")
		}
		return nil
	}
	snap, err := m.CreateSnapshot(ctx, "snap-1", src.ID)
	if err == nil && snap.Ready {
		t.Fatalf("snapshot ready though its deactivation failed: %+v", snap)
	}
	lv, ok := f.LV(vg, volume.SnapshotLVName("snap-1"))
	if !ok || !lv.HasTag("carve.dev/copying") {
		t.Fatalf("snapshot LV after a failed deactivation: %+v (found %v); want it still copying", lv, ok)
	}
	f.Fail = nil
	if snap, err = snapshotReady(t, m, src.ID); err != nil || !snap.Ready {
		t.Fatalf("snapshot after the failure: %+v, %v; want it ready", snap, err)
	}
	if lv, _ = f.LV(vg, snap.ID.LV); lv.Active || lv.HasTag("carve.dev/copying") {
		t.Errorf("ready snapshot LV: %+v; want it inactive, its copying tag gone", lv)
	}
	if lv, _ = f.LV(vg, src.ID.LV); !lv.Active {
		t.Error("published source deactivated by its snapshot")
	}
}

// An lvcreate -s killed after it made the COW store as a plain LV (tagged
// frozen, no origin, inactive) and before it turned it into the snapshot
// leaves that LV under the frozen point's name. The retried snapshot must
// not copy from it (a snapshot of zeroes): it is removed and the volume
// frozen again. The standalone soak found a copy failing on one.
func TestAnUnfinishedFrozenPointIsMadeAgain(t *testing.T) {
	m, f, src := standaloneWithSource(t, 200*mib)
	frz := volume.SnapshotLVName("snap-1") + "-frz"
	f.Put(lvm.LV{Name: frz, VGName: vg, Size: 64 * mib, Layout: "linear", Tags: []string{"carve.dev/frozen"},
		KernelMajor: -1, KernelMinor: -1})
	snap, err := snapshotReady(t, m, src.ID)
	if err != nil || !snap.Ready {
		t.Fatalf("snapshot over an unfinished frozen point: %+v, %v; want it ready", snap, err)
	}
	i := slices.Index(f.Calls, "RemoveLVOf")
	if i < 0 || !slices.Contains(f.Calls[i:], "CreateSnapshotOf") {
		t.Errorf("the unfinished frozen point was not removed and made again: calls %v", f.Calls)
	}
	if _, ok := f.LV(vg, frz); ok {
		t.Error("a frozen point outlived the copy")
	}
	// An LV of that name that is not Carve's frozen point is refused.
	f.Put(lvm.LV{Name: volume.SnapshotLVName("snap-2") + "-frz", VGName: vg, Size: 4 * mib, Layout: "linear"})
	if _, err := m.CreateSnapshot(ctx, "snap-2", src.ID); volume.CodeOf(err) != codes.FailedPrecondition {
		t.Errorf("a foreign LV in the frozen point's way: %v, want FAILED_PRECONDITION", err)
	}
}
