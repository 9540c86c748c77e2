//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	secondDisk(t, "raid1 needs two PVs")
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

// fastTag marks the PV the write caches go on (pvchange --addtag), as an
// administrator marks a node's fast disk; classes name it "@carvefast".
const fastTag = "carvefast"

// TestWriteCache: a published thick volume, written throughout, gets a
// dm-writecache on the PV with the fast tag, grows with it, loses it
// again (written back first) and gets it while unpublished; its data
// checks out at every step, GetCapacity counts the cache, and once the
// volume is deleted the cache's extents on the fast PV hold zeroes only.
func TestWriteCache(t *testing.T) {
	secondDisk(t, "the cache needs a PV of its own")
	e := setup(t)
	ctx := context.Background()
	fast := e.disks[1]
	if out, err := exec.Command("lvm", "pvchange", "--addtag", fastTag, fast).CombinedOutput(); err != nil {
		t.Fatalf("pvchange --addtag: %v: %s", err, out)
	}
	const size, cacheSize = 64 * mib, 16 * mib
	free := e.capacity(nil)
	v, err := e.c.Create(ctx, "pvc-wcache", size, nil, csiflow.MountCap(snw, "ext4"))
	must(t, err)
	staging, target := e.path("wcache-staging"), e.path("wcache")
	must(t, v.Up(ctx, node, staging, target))
	cache := map[string]string{"writeCache": "16Mi", "writeCachePVs": "@" + fastTag}

	w := startRewriter(t, filepath.Join(target, "data"), 4*mib)
	start := time.Now()
	must(t, e.modifyParams(v, cache))
	t.Logf("write cache of %d MiB attached, published and written: %v", cacheSize/mib, time.Since(start))
	e.wantCache(v, cacheSize, fast)
	if got := e.capacity(nil); got != free-size-cacheSize {
		t.Errorf("capacity %d with the cache, want %d", got, free-size-cacheSize)
	}
	start = time.Now()
	must(t, e.modifyParams(v, cache))
	t.Logf("the same modification again: %v", time.Since(start))
	wantCode(t, "raid1 legs for a cached volume", e.modify(v, "1"), codes.InvalidArgument)
	w.check()

	_, err = e.c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: v.ID, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * size}, VolumeCapability: v.Cap})
	must(t, err)
	_, err = e.c.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: v.ID, VolumePath: target,
		StagingTargetPath: v.Staging, VolumeCapability: v.Cap, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * size}})
	must(t, err)
	if lv := e.wantCache(v, cacheSize, fast); lv.Size != 2*size {
		t.Errorf("expanded with its cache: %d bytes, want %d", lv.Size, 2*size)
	}
	w.check()

	// A thick snapshot copies the volume through a COW frozen point of
	// the cached LV; its restore holds the file, at whatever point the
	// writer was.
	start = time.Now()
	snap := e.snapshot("snap-wcache", v.ID)
	t.Logf("snapshot of the cached volume, ready: %v", time.Since(start))
	r := e.createFrom("pvc-wcache-restore", 2*size, nil, &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshotId()}}})
	restored := e.path("wcache-restore")
	must(t, r.Up(ctx, node, e.path("wcache-restore-staging"), restored))
	if st, err := os.Stat(filepath.Join(restored, "data")); err != nil || st.Size() != 4*mib {
		t.Errorf("the snapshot's restore: data %v, %v; want its 4 MiB", st, err)
	}
	must(t, r.Down(ctx, restored))
	must(t, r.Delete(ctx))
	_, err = e.c.Controller.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId()})
	must(t, err)
	e.wantCache(v, cacheSize, fast)

	start = time.Now()
	must(t, e.modifyParams(v, map[string]string{"writeCache": "0"}))
	t.Logf("write cache detached (written back, wiped, removed), published and written: %v", time.Since(start))
	e.wantCache(v, 0, "")
	if got := e.capacity(nil); got != free-2*size {
		t.Errorf("capacity %d without the cache, want %d", got, free-2*size)
	}
	want := w.stop()
	must(t, v.Down(ctx, target))

	start = time.Now()
	must(t, e.modifyParams(v, cache))
	t.Logf("write cache attached, unpublished: %v", time.Since(start))
	extents := e.wantCache(v, cacheSize, fast)
	if extents.Active {
		t.Error("an unpublished volume was left active by the attach")
	}
	must(t, v.Up(ctx, node, staging, target))
	if got, err := os.ReadFile(filepath.Join(target, "data")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("restaged with its cache: %d bytes (%v), want the %d written", len(got), err, len(want))
	}
	must(t, os.WriteFile(filepath.Join(target, "more"), bytes.Repeat([]byte("carve"), 1<<18), 0o600))
	where := e.cacheExtents(v)
	must(t, v.Down(ctx, target))
	start = time.Now()
	must(t, v.Delete(ctx))
	t.Logf("cached volume deleted (written back, both wiped): %v", time.Since(start))
	if _, ok := e.lv(v); ok {
		t.Fatal("the LV outlived its deletion")
	}
	if got := e.capacity(nil); got != free {
		t.Errorf("capacity %d after the delete, want %d", got, free)
	}
	wantZeroes(t, fast, where)
}

// wantCache checks lvm2's own view: a write cache of size bytes attached
// on the PV pv (0: none, and no cachevol left visible), and returns the
// volume's LV.
func (e *env) wantCache(v *csiflow.Volume, size uint64, pv string) lvm.LV {
	e.t.Helper()
	ctx := context.Background()
	name := filepath.Base(v.ID)
	all, err := e.lvm.ListAllLVs(ctx, vg)
	must(e.t, err)
	cv, attached := lvm.AttachedCacheVol(all, name)
	lv, ok := e.lv(v)
	if !ok {
		e.t.Fatalf("LV of %s missing", v.ID)
	}
	if _, left := e.lvm.GetLV(ctx, vg, name+"_wcache"); left == nil {
		e.t.Fatalf("a cachevol of %s is left visible", name)
	}
	if size == 0 {
		if attached || lv.HasWriteCache() {
			e.t.Fatalf("LV %s still has a write cache (%s)", name, lv.Layout)
		}
		return lv
	}
	if !attached || cv.Size != size || lv.Layout != "writecache" {
		e.t.Fatalf("LV %s: layout %s, cache %+v; want a write cache of %d bytes", name, lv.Layout, cv, size)
	}
	pvs, err := e.lvm.LVDevices(ctx, vg, cv.Name)
	must(e.t, err)
	if len(pvs) != 1 || pvs[0] != pv {
		e.t.Fatalf("cachevol of %s on %v, want %s", name, pvs, pv)
	}
	return lv
}

// extentRange is where a cachevol lies on its PV, in bytes.
type extentRange struct{ offset, length int64 }

// cacheExtents reads where the volume's cachevol lies on the fast PV: its
// first extent there (lvm2's seg_pe_ranges, "/dev/vdb:0-3") past the PV's
// data start, and its size.
func (e *env) cacheExtents(v *csiflow.Volume) extentRange {
	e.t.Helper()
	cvol := filepath.Base(v.ID) + "_wcache_cvol"
	lvmOut := func(args ...string) []string {
		out, err := exec.Command("lvm", args...).CombinedOutput()
		if err != nil {
			e.t.Fatalf("lvm %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return strings.Fields(string(out))
	}
	row := lvmOut("lvs", "-a", "--noheadings", "--units", "b", "--nosuffix", "-o", "seg_pe_ranges,lv_size,vg_extent_size", vg+"/"+cvol)
	pv := lvmOut("pvs", "--noheadings", "--units", "b", "--nosuffix", "-o", "pe_start", e.disks[1])
	if len(row) != 3 || len(pv) != 1 {
		e.t.Fatalf("lvs %v, pvs %v: not one row each", row, pv)
	}
	_, r, _ := strings.Cut(row[0], ":")
	first, _, _ := strings.Cut(r, "-")
	var n [4]int64
	for i, s := range []string{first, row[1], row[2], pv[0]} {
		var err error
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			e.t.Fatalf("lvs %v, pvs %v: %q is no number", row, pv, s)
		}
	}
	return extentRange{offset: n[3] + n[0]*n[2], length: n[1]}
}

// wantZeroes reads r of the device: every byte must be zero.
func wantZeroes(t *testing.T, dev string, r extentRange) {
	t.Helper()
	f, err := os.Open(dev)
	must(t, err)
	defer func() { _ = f.Close() }()
	buf := make([]byte, r.length)
	if _, err := f.ReadAt(buf, r.offset); err != nil {
		t.Fatalf("read %s at %d: %v", dev, r.offset, err)
	}
	for i, c := range buf {
		if c != 0 {
			t.Fatalf("%s holds data at byte %d of the deleted cache's %d", dev, i, r.length)
		}
	}
}
