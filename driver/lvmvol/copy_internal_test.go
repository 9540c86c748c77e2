package lvmvol

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"carve.dev/carve/lvm"
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
