//go:build vmtest

package lifecycle

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/test/csiflow"
)

// counterWriter writes 1, 2, 3... to the file "counter" of each target in
// turn, unsynced, until stopped: at any instant the first holds the
// second's count or one more. Each count is one write of a fixed width in
// place: os.WriteFile's truncate and write were two steps, and a snapshot
// between them restored an empty counter (a flake of this test).
type counterWriter struct {
	stop, done chan struct{}
	n          atomic.Int64
}

func startCounter(t *testing.T, targets ...string) *counterWriter {
	w := &counterWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := int64(1); ; i++ {
			for _, dir := range targets {
				if err := writeCount(filepath.Join(dir, "counter"), i); err != nil {
					t.Errorf("counter %d in %s: %v", i, dir, err)
					return
				}
			}
			w.n.Store(i)
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return w
}

// writeCount overwrites the file's first 20 bytes with n, in one write.
func writeCount(path string, n int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte(fmt.Sprintf("%020d", n)), 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (w *counterWriter) halt() int64 { close(w.stop); <-w.done; return w.n.Load() }

func readCounter(t *testing.T, dir string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "counter"))
	must(t, err)
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	must(t, err)
	return n
}

// TestGroupSnapshotHoldsOneInstant: a thin and a thick volume, a writer
// counting in both in turn, unsynced; a group snapshot of both. Restored,
// the members' counters are one instant's: equal, or the first one ahead
// by the write between. Separate snapshots would be seconds apart
// (hundreds of counts). The group goes whole with its members.
func TestGroupSnapshotHoldsOneInstant(t *testing.T) {
	e := setup(t)
	e.addPool(256 * mib)
	ctx := context.Background()
	var vols []*csiflow.Volume
	var targets []string
	for i, params := range []map[string]string{volParams(true, "ext4"), volParams(false, "ext4")} {
		name := "pvc-" + strconv.Itoa(i)
		v, err := e.c.Create(ctx, name, 64*mib, params, csiflow.MountCap(snw, ""))
		must(t, err)
		target := e.path(name)
		must(t, v.Up(ctx, node, e.path(name+"-staging"), target))
		vols, targets = append(vols, v), append(targets, target)
	}
	w := startCounter(t, targets...)
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	g := e.groupSnapshot("group-1", vols[0].ID, vols[1].ID)
	live := w.halt()
	t.Logf("group snapshot ready after %v; the writer counted to %d", time.Since(start), live)

	if len(g.GetSnapshots()) != 2 {
		t.Fatalf("group %v", g)
	}
	var counts []int64
	for i, s := range g.GetSnapshots() {
		if s.GetGroupSnapshotId() != g.GetGroupSnapshotId() || s.GetSourceVolumeId() != vols[i].ID {
			t.Fatalf("member %d: %v", i, s)
		}
		params := volParams(i == 0, "ext4")
		r := e.createFrom("restored-"+strconv.Itoa(i), 64*mib, params, &csi.VolumeContentSource{
			Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: s.GetSnapshotId()}}})
		rt := e.path("restored-" + strconv.Itoa(i))
		must(t, r.Up(ctx, node, rt+"-staging", rt))
		counts = append(counts, readCounter(t, rt))
		must(t, r.Down(ctx, rt))
		must(t, r.Delete(ctx))
	}
	t.Logf("restored counters: thin %d, thick %d (live %d)", counts[0], counts[1], live)
	if d := counts[0] - counts[1]; counts[1] < 1 || d < 0 || d > 1 {
		t.Fatalf("restored counters %v are not one instant's", counts)
	}
	_, err := e.c.Group.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{
		GroupSnapshotId: g.GetGroupSnapshotId(), SnapshotIds: []string{g.GetSnapshots()[1].GetSnapshotId(), g.GetSnapshots()[0].GetSnapshotId()}})
	must(t, err)
	for i, v := range vols {
		must(t, v.Down(ctx, targets[i]))
		must(t, v.Delete(ctx))
	}
	if lvs, _ := e.lvm.ListLVs(ctx, vg); len(lvs) != 1 {
		t.Fatalf("LVs left besides the pool: %v", lvs)
	}
}

// groupSnapshot calls, as the CO does, until the group is ready.
func (e *env) groupSnapshot(name string, ids ...string) *csi.VolumeGroupSnapshot {
	e.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		resp, err := e.c.Group.CreateVolumeGroupSnapshot(context.Background(), &csi.CreateVolumeGroupSnapshotRequest{Name: name, SourceVolumeIds: ids})
		must(e.t, err)
		if g := resp.GetGroupSnapshot(); g.GetReadyToUse() {
			return g
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("group snapshot %s not ready after 2 minutes", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
