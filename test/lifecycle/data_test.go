//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/test/csiflow"
)

const pool = "pool"

// volParams are the StorageClass parameters of the thin or thick case.
func volParams(thin bool, fs string) map[string]string {
	p := map[string]string{"fsType": fs}
	if thin {
		p["thinPool"] = pool
	}
	return p
}

func (e *env) addPool(size uint64) {
	e.t.Helper()
	if _, err := e.lvm.CreateThinPool(context.Background(), vg, pool, size); err != nil {
		e.t.Fatal(err)
	}
}

// snapshot takes a snapshot and calls again, as the CO does, until it is
// ready to use.
func (e *env) snapshot(name, source string) *csi.Snapshot {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := e.c.Controller.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: source})
		must(e.t, err)
		if s := resp.GetSnapshot(); s.GetReadyToUse() {
			return s
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("snapshot %s not ready after 2 minutes", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (e *env) createFrom(name string, size int64, params map[string]string, src *csi.VolumeContentSource) *csiflow.Volume {
	e.t.Helper()
	vc := csiflow.MountCap(snw, "")
	resp, err := e.c.Controller.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{vc}, Parameters: params, VolumeContentSource: src,
	})
	must(e.t, err)
	if resp.GetVolume().GetContentSource() == nil {
		e.t.Fatal("volume created from a source does not report its content source")
	}
	return e.c.Wrap(resp.GetVolume(), vc)
}

func (e *env) fsTotal(v *csiflow.Volume, path string) int64 {
	e.t.Helper()
	st, err := e.c.Node.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: v.ID, VolumePath: path})
	must(e.t, err)
	return st.GetUsage()[0].GetTotal()
}

// forThickAndThin runs fn on a fresh VG, once for thick volumes and once
// for thin ones (in a pool made for the test).
func forThickAndThin(t *testing.T, fn func(t *testing.T, e *env, thin bool)) {
	for _, thin := range []bool{false, true} {
		t.Run(map[bool]string{false: "thick", true: "thin"}[thin], func(t *testing.T) {
			e := setup(t)
			if thin {
				e.addPool(512 << 20)
			}
			fn(t, e, thin)
		})
	}
}

// sourceWithData creates a 64 MiB volume, publishes it and writes 2 MiB of
// random data to its file "data"; it returns the volume, its target path
// and the data.
func (e *env) sourceWithData(params map[string]string) (*csiflow.Volume, string, []byte) {
	t, ctx := e.t, context.Background()
	src, err := e.c.Create(ctx, "pvc-src", 64*mib, params, csiflow.MountCap(snw, ""))
	must(t, err)
	target := e.path("src")
	must(t, src.Up(ctx, node, e.path("src-staging"), target))
	data := randomBytes(t, 2*mib)
	writeSynced(t, filepath.Join(target, "data"), data)
	return src, target, data
}

// TestSnapshotRestore: write A, snapshot, overwrite with B, delete the
// source, restore into a larger volume: it holds A, and its filesystem
// fills the larger size.
func TestSnapshotRestore(t *testing.T) {
	forThickAndThin(t, func(t *testing.T, e *env, thin bool) {
		ctx := context.Background()
		params := volParams(thin, "ext4")
		src, target, a := e.sourceWithData(params)
		b := randomBytes(t, 2*mib)
		file := filepath.Join(target, "data")

		snap := e.snapshot("snap-1", src.ID)
		if snap.GetSourceVolumeId() != src.ID || snap.GetSizeBytes() != 64*mib {
			t.Fatalf("snapshot %v", snap)
		}
		writeSynced(t, file, b)
		must(t, src.Down(ctx, target))
		must(t, src.Delete(ctx)) // the snapshot outlives its source

		restored := e.createFrom("pvc-restored", 128*mib, params, &csi.VolumeContentSource{
			Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshotId()}}})
		rt := e.path("restored")
		must(t, restored.Up(ctx, node, e.path("restored-staging"), rt))
		if got := readPrefix(t, filepath.Join(rt, "data"), len(a)); !bytes.Equal(got, a) {
			t.Fatal("restored volume does not hold the data of the snapshot point")
		}
		if total := e.fsTotal(restored, rt); total < 100*mib {
			t.Fatalf("restored filesystem is %d bytes: not grown to the 128 MiB volume", total)
		}
		must(t, restored.Down(ctx, rt))
		must(t, restored.Delete(ctx))
		_, err := e.c.Controller.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId()})
		must(t, err)
		if lvs, _ := e.lvm.ListLVs(ctx, vg); len(lvs) > map[bool]int{false: 0, true: 1}[thin] {
			t.Fatalf("LVs left behind: %v", lvs)
		}
	})
}

// TestClone clones a volume while it is mounted and written to: the clone
// holds the data written before the clone was asked for.
func TestClone(t *testing.T) {
	forThickAndThin(t, func(t *testing.T, e *env, thin bool) {
		ctx := context.Background()
		params := volParams(thin, "ext4")
		src, target, a := e.sourceWithData(params)

		clone := e.createFrom("pvc-clone", 64*mib, params, &csi.VolumeContentSource{
			Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src.ID}}})
		writeSynced(t, filepath.Join(target, "later"), []byte("after the clone"))
		ct := e.path("clone")
		must(t, clone.Up(ctx, node, e.path("clone-staging"), ct))
		if got := readPrefix(t, filepath.Join(ct, "data"), len(a)); !bytes.Equal(got, a) {
			t.Fatal("clone does not hold the source's data")
		}
		must(t, clone.Down(ctx, ct))
		must(t, src.Down(ctx, target))
		must(t, clone.Delete(ctx))
		must(t, src.Delete(ctx))
	})
}

// TestExpandOnlineUnderWrites grows a mounted volume while a writer keeps
// writing: no write fails, the data is intact, the filesystem is bigger.
func TestExpandOnlineUnderWrites(t *testing.T) {
	for _, tc := range []struct {
		fs   string
		size int64
	}{{"ext4", 64 * mib}, {"xfs", 320 * mib}, {"btrfs", 128 * mib}} {
		t.Run(tc.fs, func(t *testing.T) {
			needMkfs(t, tc.fs)
			e := setup(t)
			ctx := context.Background()
			v, err := e.c.Create(ctx, "pvc-grow", tc.size, map[string]string{"fsType": tc.fs}, csiflow.MountCap(snw, ""))
			must(t, err)
			target := e.path("grow")
			must(t, v.Up(ctx, node, e.path("grow-staging"), target))
			before := e.fsTotal(v, target)

			w := startWriter(t, filepath.Join(target, "stream"))
			resp, err := e.c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
				VolumeId: v.ID, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * tc.size}, VolumeCapability: v.Cap})
			must(t, err)
			if resp.GetCapacityBytes() != 2*tc.size || !resp.GetNodeExpansionRequired() {
				t.Fatalf("ControllerExpandVolume = %v", resp)
			}
			_, err = e.c.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{
				VolumeId: v.ID, VolumePath: target, StagingTargetPath: v.Staging, VolumeCapability: v.Cap,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * tc.size}})
			must(t, err)
			written, sum := w.stop()
			if after := e.fsTotal(v, target); after < before+tc.size*8/10 {
				t.Fatalf("filesystem %d bytes before, %d after growing by %d", before, after, tc.size)
			}
			data, err := os.ReadFile(filepath.Join(target, "stream"))
			must(t, err)
			if int64(len(data)) != written || sha256.Sum256(data) != sum {
				t.Fatalf("writer wrote %d bytes, file holds %d (or other bytes)", written, len(data))
			}
			must(t, v.Down(ctx, target))
			must(t, v.Delete(ctx))
		})
	}
}

// writer appends to a file until stopped, fsyncing as it goes.
type writer struct {
	background
	n int64
	h [32]byte
}

func startWriter(t *testing.T, path string) *writer {
	w := &writer{background: background{t: t}}
	w.run(path, func(f *os.File) error {
		h := sha256.New()
		chunk := bytes.Repeat([]byte("carve"), 1638) // ~8 KiB
		for !w.stopped.Load() {
			if _, err := f.Write(chunk); err != nil {
				return err
			}
			h.Write(chunk)
			w.n += int64(len(chunk))
			if w.n%(1<<20) < int64(len(chunk)) {
				if err := f.Sync(); err != nil {
					return err
				}
			}
		}
		copy(w.h[:], h.Sum(nil))
		return f.Sync()
	})
	return w
}

func (w *writer) stop() (int64, [32]byte) {
	w.halt(func() bool { return w.n == 0 }, "during expansion")
	return w.n, w.h
}

// TestExpandOffline grows an unstaged volume; its filesystem grows at the
// next stage. Shrinking is refused.
func TestExpandOffline(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	v, err := e.c.Create(ctx, "pvc-off", 64*mib, nil, csiflow.MountCap(snw, ""))
	must(t, err)
	target := e.path("off")
	must(t, v.Up(ctx, node, e.path("off-staging"), target))
	data := randomBytes(t, mib)
	writeSynced(t, filepath.Join(target, "data"), data)
	must(t, v.Down(ctx, target))

	_, err = e.c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: v.ID, CapacityRange: &csi.CapacityRange{RequiredBytes: 128 * mib}})
	must(t, err)
	_, err = e.c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: v.ID, CapacityRange: &csi.CapacityRange{RequiredBytes: 32 * mib, LimitBytes: 32 * mib}})
	wantCode(t, "shrink", err, codes.OutOfRange)

	must(t, v.Up(ctx, node, e.path("off-staging"), target))
	if total := e.fsTotal(v, target); total < 110*mib {
		t.Fatalf("filesystem is %d bytes after staging a 128 MiB volume", total)
	}
	if got := readPrefix(t, filepath.Join(target, "data"), len(data)); !bytes.Equal(got, data) {
		t.Fatal("data changed by the offline expansion")
	}
	must(t, v.Down(ctx, target))
	must(t, v.Delete(ctx))
}

// TestBlockExpand: a raw block volume needs nothing from the node.
func TestBlockExpand(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	v, err := e.c.Create(ctx, "pvc-blk", 16*mib, nil, csiflow.BlockCap(snw))
	must(t, err)
	target := e.path("blk")
	must(t, v.Up(ctx, node, e.path("blk-staging"), target))
	resp, err := e.c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: v.ID, CapacityRange: &csi.CapacityRange{RequiredBytes: 32 * mib}, VolumeCapability: v.Cap})
	must(t, err)
	if resp.GetNodeExpansionRequired() {
		t.Error("block volume asks for node expansion")
	}
	nresp, err := e.c.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: v.ID, VolumePath: target, VolumeCapability: v.Cap})
	must(t, err)
	if nresp.GetCapacityBytes() != 32*mib {
		t.Fatalf("block device is %d bytes after expansion to 32 MiB", nresp.GetCapacityBytes())
	}
	must(t, v.Down(ctx, target))
	must(t, v.Delete(ctx))
}

// TestXFSCloneMountedBesideSource: a clone of an xfs volume has the same
// filesystem UUID and lives on the same node; both mount at once.
func TestXFSCloneMountedBesideSource(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	params := map[string]string{"fsType": "xfs"}
	src, err := e.c.Create(ctx, "pvc-xfs", 320*mib, params, csiflow.MountCap(snw, ""))
	must(t, err)
	target := e.path("xfs")
	must(t, src.Up(ctx, node, e.path("xfs-staging"), target))
	data := randomBytes(t, mib)
	writeSynced(t, filepath.Join(target, "data"), data)
	clone := e.createFrom("pvc-xfs-clone", 320*mib, params, &csi.VolumeContentSource{
		Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src.ID}}})
	ct := e.path("xfs-clone")
	must(t, clone.Up(ctx, node, e.path("xfs-clone-staging"), ct))
	if got := readPrefix(t, filepath.Join(ct, "data"), len(data)); !bytes.Equal(got, data) {
		t.Fatal("xfs clone does not hold the source's data")
	}
	must(t, clone.Down(ctx, ct))
	must(t, src.Down(ctx, target))
	must(t, clone.Delete(ctx))
	must(t, src.Delete(ctx))
}
