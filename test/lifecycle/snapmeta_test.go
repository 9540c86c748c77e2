//go:build vmtest

package lifecycle

import (
	"context"
	"os/exec"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/snapmeta"
)

// The SnapshotMetadata service on real thin pools, through carve's gRPC
// and test/snapmeta (the client side of what the external-snapshot-metadata
// sidecar speaks): known blocks written between snapshots with direct
// I/O, and the ranges carve reports checked against them exactly.

// writeDirect writes n bytes of random data at each offset of the
// device, around the page cache (O_DIRECT: what is written is in the pool
// when the call returns).
func writeDirect(t *testing.T, dev string, n int, offsets ...int64) {
	t.Helper()
	fd, err := syscall.Open(dev, syscall.O_WRONLY|syscall.O_DIRECT, 0)
	must(t, err)
	defer func() { _ = syscall.Close(fd) }()
	// O_DIRECT wants an aligned buffer: a mapping is page-aligned.
	buf, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	must(t, err)
	defer func() { _ = syscall.Munmap(buf) }()
	copy(buf, randomBytes(t, n))
	for _, off := range offsets {
		if w, err := syscall.Pwrite(fd, buf, off); err != nil || w != n {
			t.Fatalf("pwrite %s at %d: %d, %v", dev, off, w, err)
		}
	}
}

// thinBlockVolume creates and attaches a thin raw block volume.
func (e *env) thinBlockVolume(name string, size int64) *csiflow.Volume {
	e.t.Helper()
	v, err := e.c.Create(context.Background(), name, size, map[string]string{"thinPool": pool}, csiflow.BlockCap(snw))
	must(e.t, err)
	must(e.t, v.Attach(context.Background(), node))
	return v
}

// heldRoot is the held metadata root of the thin pool ("-": none held).
func heldRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("dmsetup", "status", "--target", "thin-pool").CombinedOutput()
	if err != nil {
		t.Fatalf("dmsetup status: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, st, _ := strings.Cut(line, ": ")
		if f := strings.Fields(st); (name == vg+"-"+pool+"-tpool" || name == vg+"-"+pool) && len(f) > 6 {
			return f[6]
		}
	}
	t.Fatalf("no status of thin pool %s/%s in %q", vg, pool, out)
	return ""
}

func rng(off, n int64) snapmeta.Range { return snapmeta.Range{Offset: off, Length: n} }

func TestSnapshotMetadata(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.addPool(1 << 30)
	v := e.thinBlockVolume("pvc-cbt", 64*mib)
	dev := v.PublishContext["devicePath"]

	// The pool's chunk: what one 4 KiB write at 0 allocates.
	writeDirect(t, dev, 4096, 0)
	probe := e.snapshot("cbt-probe", v.ID).GetSnapshotId()
	got, err := snapmeta.Allocated(ctx, e.c.Metadata, probe, snapmeta.Options{})
	must(t, err)
	if len(got.Ranges) != 1 || got.Ranges[0].Offset != 0 || got.Ranges[0].Length < 64<<10 {
		t.Fatalf("one 4 KiB write at 0: %+v, want one chunk at 0", got)
	}
	chunk := got.Ranges[0].Length
	t.Logf("pool chunk %d KiB", chunk>>10)

	// Before a: chunk 0 (above); 8 KiB across chunks 2 and 3; chunks
	// 100-109 whole.
	writeDirect(t, dev, 8192, 3*chunk-4096)
	writeDirect(t, dev, int(10*chunk), 100*chunk)
	a := e.snapshot("cbt-a", v.ID).GetSnapshotId()
	// Between a and b: 4 KiB inside chunk 2 (shared with a), chunk 200
	// new, 4 KiB inside chunk 105.
	writeDirect(t, dev, 4096, 2*chunk+8192, 200*chunk, 105*chunk+chunk-4096)
	b := e.snapshot("cbt-b", v.ID).GetSnapshotId()

	began := time.Now()
	got, err = snapmeta.Allocated(ctx, e.c.Metadata, a, snapmeta.Options{})
	must(t, err)
	want := []snapmeta.Range{rng(0, chunk), rng(2*chunk, 2*chunk), rng(100*chunk, 10*chunk)}
	if !slices.Equal(got.Ranges, want) || got.Capacity != 64*mib || got.Type != csi.BlockMetadataType_VARIABLE_LENGTH {
		t.Errorf("allocated of a: %+v, want exactly %v of 64 MiB", got, want)
	}
	t.Logf("GetMetadataAllocated of a: %v in %v", got.Ranges, time.Since(began))

	began = time.Now()
	got, err = snapmeta.Delta(ctx, e.c.Metadata, a, b, snapmeta.Options{})
	must(t, err)
	want = []snapmeta.Range{rng(2*chunk, chunk), rng(105*chunk, chunk), rng(200*chunk, chunk)}
	if !slices.Equal(got.Ranges, want) || got.Capacity != 64*mib {
		t.Errorf("delta a..b: %+v, want exactly the chunks written between: %v", got, want)
	}
	t.Logf("GetMetadataDelta a..b: %v in %v", got.Ranges, time.Since(began))

	// Pages: one tuple a message, from inside chunk 2; concatenated they
	// are the unpaged answer cut at the offset.
	from := 2*chunk + 100
	got, err = snapmeta.Allocated(ctx, e.c.Metadata, a, snapmeta.Options{From: from, MaxResults: 1})
	must(t, err)
	want = []snapmeta.Range{rng(from, 2*chunk-100), rng(100*chunk, 10*chunk)}
	if !slices.Equal(got.Ranges, want) || got.Messages != 2 {
		t.Errorf("allocated of a from %d, max_results 1: %+v, want %v in 2 messages", from, got, want)
	}
	got, err = snapmeta.Delta(ctx, e.c.Metadata, a, b, snapmeta.Options{From: 106 * chunk, MaxResults: 1})
	must(t, err)
	if want = []snapmeta.Range{rng(200*chunk, chunk)}; !slices.Equal(got.Ranges, want) {
		t.Errorf("delta from chunk 106: %+v, want %v", got, want)
	}
	got, err = snapmeta.Delta(ctx, e.c.Metadata, a, b, snapmeta.Options{From: 64 * mib})
	if err != nil || len(got.Ranges) != 0 || got.Messages != 1 {
		t.Errorf("delta from the size: %+v, %v; want one empty message", got, err)
	}
	_, err = snapmeta.Delta(ctx, e.c.Metadata, a, b, snapmeta.Options{From: 64*mib + 1})
	wantCode(t, "past the size", err, codes.OutOfRange)

	// IDs that name nothing served, and a delta across volumes.
	other := e.thinBlockVolume("pvc-cbt-other", 8*mib)
	o := e.snapshot("cbt-o", other.ID).GetSnapshotId()
	for _, tc := range []struct {
		base, target string
		code         codes.Code
	}{
		{"", b, codes.InvalidArgument},
		{node + "/" + vg + "/snapshot-missing", b, codes.NotFound},
		{"other-node/" + vg + "/" + path.Base(a), b, codes.NotFound},
		{v.ID, b, codes.NotFound},
		{node + "/" + vg + "/" + pool, b, codes.NotFound},
		{o, b, codes.InvalidArgument},
		{b, a, codes.InvalidArgument}, // base newer than target (made at least a second apart: see below)
	} {
		_, err := snapmeta.Delta(ctx, e.c.Metadata, tc.base, tc.target, snapmeta.Options{})
		if tc.code == codes.InvalidArgument && tc.base == b && status.Code(err) == codes.OK {
			t.Log("a and b made within one second: their order is not told, the delta is served")
			continue
		}
		wantCode(t, "delta "+tc.base+" .. "+tc.target, err, tc.code)
	}

	// Thick snapshots: a full copy is all allocated; their delta is not
	// known (FAILED_PRECONDITION).
	thick, err := e.c.Create(ctx, "pvc-cbt-thick", 8*mib, nil, csiflow.BlockCap(snw))
	must(t, err)
	ta := e.snapshot("cbt-ta", thick.ID).GetSnapshotId()
	tb := e.snapshot("cbt-tb", thick.ID).GetSnapshotId()
	got, err = snapmeta.Allocated(ctx, e.c.Metadata, ta, snapmeta.Options{From: mib})
	if err != nil || !slices.Equal(got.Ranges, []snapmeta.Range{rng(mib, 7*mib)}) || got.Capacity != 8*mib {
		t.Errorf("thick allocated from 1 MiB: %+v, %v", got, err)
	}
	_, err = snapmeta.Delta(ctx, e.c.Metadata, ta, tb, snapmeta.Options{})
	wantCode(t, "thick delta", err, codes.FailedPrecondition)

	if h := heldRoot(t); h != "-" {
		t.Errorf("a metadata snapshot is held after the reads: root %s", h)
	}
}

// TestSnapshotMetadataDeletedMidStream: a snapshot deleted while a client
// reads its ranges slowly ends the stream NOT_FOUND, and the pool holds no
// metadata snapshot after; a metadata snapshot a killed carve left is
// released at the next carve's start.
func TestSnapshotMetadataDeletedMidStream(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.addPool(1 << 30)
	// 6000 runs of one chunk (every other 64 KiB chunk of 750 MiB): with
	// one tuple a message, far more than gRPC's windows buffer, so the
	// server is held at Send, thin_dump behind it, until the client reads.
	const runs, chunk = 6000, 64 << 10
	v := e.thinBlockVolume("pvc-cbt-big", 2*runs*chunk)
	offsets := make([]int64, runs)
	for i := range offsets {
		offsets[i] = int64(2 * i * chunk)
	}
	began := time.Now()
	writeDirect(t, v.PublishContext["devicePath"], 4096, offsets...)
	t.Logf("wrote %d runs in %v", runs, time.Since(began))
	a := e.snapshot("cbt-big-a", v.ID).GetSnapshotId()

	// The whole stream first, in bounded messages.
	began = time.Now()
	n := 0
	got, err := snapmeta.Allocated(ctx, e.c.Metadata, a, snapmeta.Options{Each: func(rs []snapmeta.Range) error {
		n += len(rs)
		return nil
	}})
	must(t, err)
	if n != runs || got.Messages != (runs+1023)/1024 {
		t.Errorf("%d ranges in %d messages, want %d in %d", n, got.Messages, runs, (runs+1023)/1024)
	}
	t.Logf("GetMetadataAllocated of %d runs: %d messages in %v", runs, got.Messages, time.Since(began))

	// Now a slow reader: the first message, then the snapshot deleted.
	// Its connection's flow control windows are fixed at 64 KiB (no
	// growth by bandwidth estimation, which let all 6000 messages of a
	// first run be buffered on the way): about 2000 messages fit, and the
	// server waits at Send with thin_dump behind it.
	conn, err := grpc.NewClient(e.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	must(t, err)
	defer func() { _ = conn.Close() }()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := csi.NewSnapshotMetadataClient(conn).GetMetadataAllocated(sctx, &csi.GetMetadataAllocatedRequest{SnapshotId: a, MaxResults: 1})
	must(t, err)
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // the server fills the windows and waits
	if h := heldRoot(t); h == "-" {
		t.Log("no metadata snapshot held mid-stream: the tool had finished already")
	}
	_, err = e.c.Controller.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: a})
	must(t, err)
	received := 1
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
		received++
	}
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("stream of a snapshot deleted mid-way ended %v after %d messages, want NOT_FOUND saying so", err, received)
	}
	t.Logf("stream ended after %d of %d ranges: %v", received, runs, err)
	if received >= runs {
		t.Errorf("every range arrived: the deletion did not happen mid-stream")
	}
	if h := heldRoot(t); h != "-" {
		t.Errorf("a metadata snapshot is held after the stream ended: root %s", h)
	}

	// A metadata snapshot left reserved, as by a carve killed mid-read:
	// the next carve's start releases it.
	tpool := vg + "-" + pool + "-tpool"
	if out, err := exec.Command("dmsetup", "message", tpool, "0", "reserve_metadata_snap").CombinedOutput(); err != nil {
		t.Fatalf("reserve by hand: %v: %s", err, out)
	}
	if h := heldRoot(t); h == "-" {
		t.Fatal("the reserve by hand holds nothing")
	}
	e.c = start(t)
	if h := heldRoot(t); h != "-" {
		t.Errorf("carve's start left the metadata snapshot held: root %s", h)
	}
}
