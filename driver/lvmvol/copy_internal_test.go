package lvmvol

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"carve.dev/carve/lvm"
	"golang.org/x/sys/unix"
)

// A copy cut short resumes from its last checkpoint: the bytes before it
// are not written again, every byte after it is, and every checkpoint
// comes after a flush.
func TestCopyDeviceResumes(t *testing.T) {
	const size = 2*copyChunk + copyChunk/2 + 12345
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(src, data, 0o600))
	must(t, os.WriteFile(dst, bytes.Repeat([]byte{0xFF}, size), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	var records []int64
	flushes := 0
	stopAfterTwo := func(done int64, flush func() error) error {
		must(t, flush())
		flushes++
		records = append(records, done)
		if len(records) == 2 {
			cancel() // the process dies here
		}
		return nil
	}
	if err := copyDevice(ctx, src, dst, 0, size, stopAfterTwo); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v, want it cut short", err)
	}
	if !slices.Equal(records, []int64{copyChunk, 2 * copyChunk}) || flushes != 2 {
		t.Fatalf("checkpoints %v with %d flushes, want one per chunk, each flushed", records, flushes)
	}

	// Mark a byte the first run copied: resuming must leave it alone.
	f, err := os.OpenFile(dst, os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte{^data[0]}, 0)
	must(t, err)
	must(t, f.Close())
	none := func(int64, func() error) error { return nil }
	must(t, copyDevice(context.Background(), src, dst, records[1], size, none))
	got, err := os.ReadFile(dst)
	must(t, err)
	if got[0] != ^data[0] {
		t.Error("the resumed copy wrote bytes before its start again")
	}
	if !bytes.Equal(got[1:], data[1:]) {
		t.Error("the resumed copy does not hold the source's data")
	}
}

// A copy's record counts only for the source it was made from: a frozen
// point made anew is another image.
func TestCopyProgressIsTiedToItsSource(t *testing.T) {
	lv := lvm.LV{Name: "x", VGName: "vg", Tags: []string{
		tagCopiedPrefix + "uuid-a:8388608", tagCopiedPrefix + "uuid-b:12582912", tagCopiedPrefix + "12582912",
	}}
	m := &Manager{}
	if got := m.progressOf(lv, tagCopiedPrefix, "uuid-a").resume(16<<20, sectorSize); got != 8<<20 {
		t.Errorf("resume for uuid-a = %d, want its own record, 8 MiB", got)
	}
	if got := m.progressOf(lv, tagCopiedPrefix, "uuid-c").resume(16<<20, sectorSize); got != 0 {
		t.Errorf("resume for a new source = %d, want 0", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A copy of whole blocks goes around the page cache (O_DIRECT) where the
// file allows it, and still copies every byte; the benchmark found the
// buffered copy at a twentieth of dd's speed.
func TestCopyDeviceBypassesThePageCache(t *testing.T) {
	const size = 2*copyChunk + directAlign
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	data := make([]byte, size)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(src, data, 0o600))
	must(t, os.WriteFile(dst, make([]byte, size), 0o600))

	f, direct, err := openForCopy(src, os.O_RDONLY, true)
	must(t, err)
	flags := fdFlags(t, f)
	must(t, f.Close())
	if !direct {
		t.Skipf("%s refuses O_DIRECT (a tmpfs?): the buffered fallback is all there is to test", dir)
	}
	if flags&unix.O_DIRECT == 0 {
		t.Errorf("opened for a direct copy with flags %o, no O_DIRECT", flags)
	}
	var seen []int64
	must(t, copyDevice(context.Background(), src, dst, 0, size, func(done int64, flush func() error) error {
		seen = append(seen, done)
		return flush()
	}))
	got, err := os.ReadFile(dst)
	must(t, err)
	if !bytes.Equal(got, data) {
		t.Error("the direct copy does not hold the source's data")
	}
	if !slices.Equal(seen, []int64{copyChunk, 2 * copyChunk}) {
		t.Errorf("checkpoints %v", seen)
	}
}

// fdFlags reads the open flags of f from /proc/self/fdinfo (octal).
func fdFlags(t *testing.T, f *os.File) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", f.Fd()))
	must(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			must(t, err)
			return int(n)
		}
	}
	t.Fatal("no flags in fdinfo")
	return 0
}

// A read that fails mid-copy (a source shorter than the copy, as a bad
// disk's read error) ends the copy with that error, where it happened,
// after the chunks read before it were written.
func TestCopyDeviceReportsAReadError(t *testing.T) {
	const size = 3 * copyChunk
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	data := make([]byte, copyChunk+copyChunk/2)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(src, data, 0o600))
	must(t, os.WriteFile(dst, make([]byte, size), 0o600))
	var seen []int64
	err := copyDevice(context.Background(), src, dst, 0, size, func(done int64, flush func() error) error {
		seen = append(seen, done)
		return flush()
	})
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), fmt.Sprintf("read %s at %d", src, copyChunk)) {
		t.Fatalf("copy of a short source: %v, want the read error at %d", err, copyChunk)
	}
	if !slices.Equal(seen, []int64{copyChunk}) {
		t.Errorf("checkpoints %v, want the first chunk's only", seen)
	}
	got, err := os.ReadFile(dst)
	must(t, err)
	if !bytes.Equal(got[:copyChunk], data[:copyChunk]) {
		t.Error("the chunk read before the failure was not written")
	}
}
