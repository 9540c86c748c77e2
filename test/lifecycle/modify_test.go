//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/lvm"
	"carve.dev/carve/test/csiflow"
)

// TestModifyRedundancy changes a live volume's mutable mirrors with
// ControllerModifyVolume while a writer rewrites a file on it: linear to
// raid1 (its two legs on the VG's two PVs, in sync when the call
// returns), the same call again (nothing to do), a third leg the VG cannot
// place (RESOURCE_EXHAUSTED, nothing changed), back to linear; then an
// unpublished volume to raid1, which stays unpublished. Every byte
// written reads back, while raid1 and after an unstage and restage, and
// GetCapacity counts the second leg.
func TestModifyRedundancy(t *testing.T) {
	if os.Getenv("CARVE_TEST_DISK2") == "" {
		t.Skip("CARVE_TEST_DISK2 is not set: raid1 needs two PVs")
	}
	e := setup(t)
	ctx := context.Background()
	const size = 64 * mib
	v, err := e.c.Create(ctx, "pvc-modify", size, nil, csiflow.MountCap(snw, "ext4"))
	must(t, err)
	staging, target := e.path("modify-staging"), e.path("modify")
	must(t, v.Up(ctx, node, staging, target))
	e.wantLegs(v, 0)
	free := e.capacity(nil)

	w := startRewriter(t, filepath.Join(target, "data"), 4*mib)
	start := time.Now()
	must(t, e.modify(v, "1"))
	t.Logf("linear to raid1, %d MiB, while written: %v (legs in sync when it returned)", size/mib, time.Since(start))
	lv := e.wantLegs(v, 1)
	if lv.SyncPercent < 100 || !lv.Active {
		t.Fatalf("after the conversion: sync %.1f%%, active %v", lv.SyncPercent, lv.Active)
	}
	if got := e.capacity(nil); got > free-size {
		t.Errorf("capacity %d after a second leg of %d, was %d", got, size, free)
	}
	start = time.Now()
	must(t, e.modify(v, "1"))
	t.Logf("the same modification again: %v", time.Since(start))
	wantCode(t, "a third leg on two PVs", e.modify(v, "2"), codes.ResourceExhausted)
	e.wantLegs(v, 1)
	w.check() // the writer's bytes while raid1

	start = time.Now()
	must(t, e.modify(v, "0"))
	t.Logf("raid1 to linear while written: %v", time.Since(start))
	e.wantLegs(v, 0)
	if got := e.capacity(nil); got != free {
		t.Errorf("capacity %d back to linear, want %d", got, free)
	}
	want := w.stop()
	must(t, v.Down(ctx, target))

	// Unpublished: held active for lvm2, left inactive.
	start = time.Now()
	must(t, e.modify(v, "1"))
	t.Logf("linear to raid1, unpublished: %v", time.Since(start))
	if lv := e.wantLegs(v, 1); lv.Active || slices.Contains(lv.Tags, "carve.dev/held") {
		t.Fatalf("unpublished volume after the conversion: active %v, tags %v", lv.Active, lv.Tags)
	}
	must(t, v.Up(ctx, node, staging, target))
	if got, err := os.ReadFile(filepath.Join(target, "data")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("restaged, raid1 again: %d bytes (%v), want the %d written", len(got), err, len(want))
	}
	must(t, v.Down(ctx, target))
	must(t, v.Delete(ctx))
}

func (e *env) modify(v *csiflow.Volume, mirrors string) error {
	_, err := e.c.Controller.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{
		VolumeId: v.ID, MutableParameters: map[string]string{"mirrors": mirrors}})
	return err
}

// wantLegs checks lvm2's own view of the volume: legs extra raid1 images,
// each on a PV of its own (linear: one PV), and its mirrors tag.
func (e *env) wantLegs(v *csiflow.Volume, legs int) lvm.LV {
	e.t.Helper()
	ctx := context.Background()
	all, err := e.lvm.ListAllLVs(ctx, vg)
	must(e.t, err)
	i := slices.IndexFunc(all, func(lv lvm.LV) bool { return lv.Name == filepath.Base(v.ID) })
	if i < 0 {
		e.t.Fatalf("LV of %s missing", v.ID)
	}
	lv := all[i]
	pvs, err := e.lvm.LVDevices(ctx, vg, lv.Name)
	must(e.t, err)
	raid := lv.Layout == "raid,raid1"
	if got := lvm.Mirrors(all, lv.Name); got != legs || raid != (legs > 0) || len(pvs) != legs+1 {
		e.t.Fatalf("LV %s: layout %s, %d mirrors on PVs %v; want %d mirrors, one PV each", lv.Name, lv.Layout, got, pvs, legs)
	}
	if tagged := slices.Contains(lv.Tags, "carve.dev/mirrors=1"); tagged != (legs == 1) {
		e.t.Fatalf("LV %s tags %v with %d mirrors", lv.Name, lv.Tags, legs)
	}
	return lv
}

// rewriter rewrites a file of n bytes over and over, in 64 KiB blocks of
// fresh random bytes, fsyncing every MiB, at about 6 MiB/s (the VM has one
// core for it and lvm2): what it last wrote is what the file must hold.
type rewriter struct {
	t       *testing.T
	path    string
	mu      sync.Mutex
	want    []byte
	stopped atomic.Bool
	wg      sync.WaitGroup
	err     error
	passes  int
}

func startRewriter(t *testing.T, path string, n int) *rewriter {
	w := &rewriter{t: t, path: path, want: make([]byte, n)}
	f, err := os.Create(path)
	must(t, err)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { _ = f.Close() }()
		block := make([]byte, 64<<10)
		for off := 0; !w.stopped.Load(); off = (off + len(block)) % n {
			_, _ = rand.Read(block)
			w.mu.Lock()
			copy(w.want[off:], block)
			_, err := f.WriteAt(block, int64(off))
			if err == nil && (off+len(block))%(1<<20) == 0 {
				err = f.Sync()
			}
			if off+len(block) == n {
				w.passes++
			}
			w.mu.Unlock()
			if err != nil {
				w.err = err
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		w.err = f.Sync()
	}()
	return w
}

// check compares the file with what was written, pausing the writer.
func (w *rewriter) check() {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	got, err := os.ReadFile(w.path)
	if err != nil || !bytes.Equal(got, w.want) {
		w.t.Fatalf("%s: %d bytes (%v), not the %d written", w.path, len(got), err, len(w.want))
	}
}

// stop ends the writes and returns what the file must hold.
func (w *rewriter) stop() []byte {
	w.t.Helper()
	w.stopped.Store(true)
	w.wg.Wait()
	if w.err != nil {
		w.t.Fatalf("write while converting failed: %v", w.err)
	}
	if w.passes == 0 {
		w.t.Fatal("the writer never rewrote the whole file")
	}
	w.t.Logf("the writer rewrote %s %d times", w.path, w.passes)
	w.check()
	return w.want
}
