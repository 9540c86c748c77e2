//go:build vmtest

package lvm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const vmChunk = 64 << 10 // the pools' chunk size here

// vmThinPool makes thin pool "pool" of size bytes with 64 KiB chunks
// (CreateThinPool leaves the chunk size to lvm2).
func vmThinPool(t *testing.T, c *Client, size uint64) {
	t.Helper()
	if _, err := c.run(context.Background(), "lvcreate", "--type", "thin-pool", "-L", strconv.FormatUint(size, 10)+"b",
		"--chunksize", "64k", "-n", "pool", "--yes", vmVG); err != nil {
		t.Fatal(err)
	}
}

// dd writes count blocks of bs bytes at block seek of path, around the
// page cache (oflag=direct), as the test's known writes.
func dd(t *testing.T, path string, bs string, seek, count uint64) {
	t.Helper()
	out, err := exec.Command("dd", "if=/dev/urandom", "of="+path, "bs="+bs, "seek="+strconv.FormatUint(seek, 10),
		"count="+strconv.FormatUint(count, 10), "oflag=direct", "conv=notrunc", "status=none").CombinedOutput()
	if err != nil {
		t.Fatalf("dd of=%s bs=%s seek=%d count=%d: %v: %s", path, bs, seek, count, err, out)
	}
}

// heldRoot is the held metadata root of the pool's status ("-": none).
func heldRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("dmsetup", "status", dmName(vmVG, "pool", "")+"-tpool").CombinedOutput()
	f := strings.Fields(string(out))
	if err != nil || len(f) < 7 || f[2] != "thin-pool" {
		t.Fatalf("dmsetup status: %v: %s", err, out)
	}
	return f[6]
}

func poolMessageByHand(t *testing.T, msg string) {
	t.Helper()
	if out, err := exec.Command("dmsetup", "message", dmName(vmVG, "pool", "")+"-tpool", "0", msg).CombinedOutput(); err != nil {
		t.Fatalf("dmsetup message %s: %v: %s", msg, err, out)
	}
}

// ranges runs read and returns what it hands on, checking the contract.
func ranges(t *testing.T, from uint64, read func(each func(Range) error) error) []Range {
	t.Helper()
	var got []Range
	if err := read(func(r Range) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	checkRanges(t, got, from, 0)
	return got
}

// TestVMThinBlocks writes known chunks of a thin LV around two
// snapshots and checks that the pool's metadata tells exactly those
// chunks: allocated in snapshot a, changed from a to b.
func TestVMThinBlocks(t *testing.T) {
	c, _ := vmClient(t)
	ctx := context.Background()
	vmThinPool(t, c, 256<<20)
	o, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "o", Size: 64 << 20, ThinPool: "pool"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "thick", Size: 4 << 20}); err != nil {
		t.Fatal(err)
	}
	// Before a: chunks 0-1, 10; 4 KiB inside chunk 6; 8 KiB across the
	// boundary of chunks 15 and 16.
	dd(t, o.Path, "64k", 0, 2)
	dd(t, o.Path, "64k", 10, 1)
	dd(t, o.Path, "4k", 6*16+2, 1)
	dd(t, o.Path, "4k", 15*16+15, 2)
	if _, err := c.CreateSnapshotOf(ctx, o, "a", SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	// Between a and b: chunk 1 again, 4 KiB inside chunk 10 (both
	// written before a), chunks 20-22 and 1000 (new).
	dd(t, o.Path, "64k", 1, 1)
	dd(t, o.Path, "4k", 10*16+5, 1)
	dd(t, o.Path, "64k", 20, 3)
	dd(t, o.Path, "64k", 1000, 1)
	if _, err := c.CreateSnapshotOf(ctx, o, "b", SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}

	allocated := func(lv string, from uint64) []Range {
		t.Helper()
		start := time.Now()
		got := ranges(t, from, func(each func(Range) error) error { return c.ThinAllocated(ctx, vmVG, lv, from, each) })
		t.Logf("ThinAllocated(%s, from %d): %d ranges in %v", lv, from, len(got), time.Since(start))
		return got
	}
	delta := func(base, target string, from uint64) []Range {
		t.Helper()
		start := time.Now()
		got := ranges(t, from, func(each func(Range) error) error { return c.ThinDelta(ctx, vmVG, base, target, from, each) })
		t.Logf("ThinDelta(%s, %s, from %d): %d ranges in %v", base, target, from, len(got), time.Since(start))
		return got
	}
	want := func(what string, got, want []Range) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	want("ThinAllocated(a)", allocated("a", 0), chunks(0, 2, 6, 1, 10, 1, 15, 2))
	want("ThinAllocated(b)", allocated("b", 0), chunks(0, 2, 6, 1, 10, 1, 15, 2, 20, 3, 1000, 1))
	want("ThinAllocated(o)", allocated("o", 0), chunks(0, 2, 6, 1, 10, 1, 15, 2, 20, 3, 1000, 1))
	want("ThinDelta(a, b)", delta("a", "b", 0), chunks(1, 1, 10, 1, 20, 3, 1000, 1))
	want("ThinDelta(b, a)", delta("b", "a", 0), chunks(1, 1, 10, 1, 20, 3, 1000, 1))
	want("ThinDelta(a, a)", delta("a", "a", 0), nil)
	// from in the middle of chunk 10: it comes whole; from at its end:
	// it does not.
	want("ThinDelta(a, b, from 10.5 chunks)", delta("a", "b", 10*vmChunk+vmChunk/2), chunks(10, 1, 20, 3, 1000, 1))
	want("ThinDelta(a, b, from 11 chunks)", delta("a", "b", 11*vmChunk), chunks(20, 3, 1000, 1))
	want("ThinAllocated(a, from 15 chunks)", allocated("a", 15*vmChunk), chunks(15, 2))

	if err := c.ThinDelta(ctx, vmVG, "a", "thick", 0, func(Range) error { return nil }); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("ThinDelta of a thick LV: %v, want ErrInvalidArgument", err)
	}
	if held := heldRoot(t); held != "-" {
		t.Errorf("after the reads the pool holds metadata root %s", held)
	}

	// A metadata snapshot left reserved (as by carve killed between
	// reserve and release) does not stop the next read, which leaves none.
	poolMessageByHand(t, "reserve_metadata_snap")
	if heldRoot(t) == "-" {
		t.Fatal("the reserve by hand holds no root")
	}
	want("ThinDelta(a, b) after a reserve left", delta("a", "b", 0), chunks(1, 1, 10, 1, 20, 3, 1000, 1))
	if held := heldRoot(t); held != "-" {
		t.Errorf("after a read that found one left, the pool holds metadata root %s", held)
	}

	// A read stopped by its consumer or its context releases too.
	stop := errors.New("consumer gone")
	if err := c.ThinAllocated(ctx, vmVG, "b", 0, func(Range) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("ThinAllocated stopped: %v, want the callback's error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	err = c.ThinDelta(cctx, vmVG, "a", "b", 0, func(Range) error { cancel(); return cctx.Err() })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ThinDelta cancelled: %v", err)
	}
	if held := heldRoot(t); held != "-" {
		t.Errorf("after stopped reads the pool holds metadata root %s", held)
	}

	// An inactive pool is activated for the read.
	for _, lv := range []string{"o", "pool"} {
		if _, err := c.run(ctx, "lvchange", "-an", vmVG+"/"+lv); err != nil {
			t.Fatal(err)
		}
	}
	want("ThinAllocated(a) of an inactive pool", allocated("a", 0), chunks(0, 2, 6, 1, 10, 1, 15, 2))
}

// TestVMThinBlocksTiming measures the reads of a 1 GiB thin LV fully
// written: sequentially by dd (one mapping in the pool's metadata), then
// every other chunk again (16384 mappings: old and new data blocks
// alternate; 8192 changed runs), for judging their time and memory.
// It writes 1.5 GiB, minutes in the VM: make test (-test.short) skips
// it, make test-full (FULL=1) runs it.
func TestVMThinBlocksTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1.5 GiB: a measurement, run by make test-full")
	}
	c, _ := vmClient(t)
	ctx := context.Background()
	const size = 1 << 30
	vmThinPool(t, c, 2*size)
	big, err := c.CreateLV(ctx, CreateLVOptions{VG: vmVG, Name: "big", Size: size, ThinPool: "pool"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out, err := exec.Command("dd", "if=/dev/zero", "of="+big.Path, "bs=1M", "count=1024", "oflag=direct", "conv=notrunc",
		"status=none").CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	t.Logf("dd of 1 GiB: %v", time.Since(start))
	if _, err := c.CreateSnapshotOf(ctx, big, "s1", SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	writeEveryOtherChunk(t, big.Path, size)
	t.Logf("every other 64 KiB chunk written again: %v", time.Since(start))
	if _, err := c.CreateSnapshotOf(ctx, big, "s2", SnapshotOptions{}); err != nil {
		t.Fatal(err)
	}

	measure := func(what string, read func(each func(Range) error) error) []Range {
		t.Helper()
		var got []Range
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		err := read(func(r Range) error { got = append(got, r); return nil })
		d := time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkRanges(t, got, 0, size)
		// The ranges are kept here to be checked; a stream does not.
		t.Logf("%s: %d ranges in %v (Go: %d KiB allocated in all, %d mallocs)", what, len(got), d,
			(after.TotalAlloc-before.TotalAlloc)>>10, after.Mallocs-before.Mallocs)
		return got
	}
	whole := []Range{{Offset: 0, Length: size}}
	if got := measure("ThinAllocated(s1)", func(e func(Range) error) error { return c.ThinAllocated(ctx, vmVG, "s1", 0, e) }); !slices.Equal(got, whole) {
		t.Errorf("ThinAllocated(s1) = %v, want %v", got, whole)
	}
	if got := measure("ThinAllocated(s2)", func(e func(Range) error) error { return c.ThinAllocated(ctx, vmVG, "s2", 0, e) }); !slices.Equal(got, whole) {
		t.Errorf("ThinAllocated(s2) = %v, want %v", got, whole)
	}
	got := measure("ThinDelta(s1, s2)", func(e func(Range) error) error { return c.ThinDelta(ctx, vmVG, "s1", "s2", 0, e) })
	var odd []Range
	for i := uint64(1); i < size/vmChunk; i += 2 {
		odd = append(odd, Range{Offset: i * vmChunk, Length: vmChunk})
	}
	if !slices.Equal(got, odd) {
		t.Errorf("ThinDelta(s1, s2): %d ranges, want the %d odd chunks", len(got), len(odd))
	}

	// The tools alone, their output thrown away, for the share of the
	// parsing in the figures above.
	poolMessageByHand(t, "reserve_metadata_snap")
	defer poolMessageByHand(t, "release_metadata_snap")
	ids := map[string]string{}
	out, err := c.run(ctx, append(append([]string{"lvs", "--readonly"}, reportArgs("lv_name,thin_id")...), vmVG)...)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := decodeReport[thinRow](out, "lv")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		ids[r.Name] = r.ThinID
	}
	tmeta := "/dev/mapper/" + dmName(vmVG, "pool", "") + "_tmeta"
	for _, args := range [][]string{
		{"thin_dump", "--metadata-snap", "--dev-id", ids["s2"], tmeta},
		{"thin_delta", "--metadata-snap", "--snap1", ids["s1"], "--snap2", ids["s2"], tmeta},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		var n countWriter
		cmd.Stdout = &n
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		t.Logf("%s alone: %d bytes of XML in %v", strings.Join(args[:len(args)-1], " "), n, time.Since(start))
	}
}

// countWriter counts the bytes written to it.
type countWriter int64

func (w *countWriter) Write(p []byte) (int, error) { *w += countWriter(len(p)); return len(p), nil }

// writeEveryOtherChunk writes the odd 64 KiB chunks of the first size
// bytes of path with O_DIRECT: each a chunk the pool shares with a
// snapshot, so each gets a new data block.
func writeEveryOtherChunk(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	// O_DIRECT wants an aligned buffer: a mapping's is a page's.
	buf, err := syscall.Mmap(-1, 0, vmChunk, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Munmap(buf) }()
	for i := range buf {
		buf[i] = byte(i % 253)
	}
	for at := int64(vmChunk); at < size; at += 2 * vmChunk {
		if _, err := f.WriteAt(buf, at); err != nil {
			t.Fatalf("write at %d: %v", at, err)
		}
	}
}
