package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// copyChunk is the unit of a data copy: large enough to stream, small
// enough to notice a cancellation quickly.
const copyChunk = 4 << 20

// Checkpoint is told, between chunks, that done bytes are copied; flush
// makes them durable.
type Checkpoint func(done int64, flush func() error) error

// Copier copies bytes [from, size) of block device src to block device dst,
// calling checkpoint between chunks, and flushes dst before it returns.
type Copier interface {
	Copy(ctx context.Context, src, dst string, from, size int64, checkpoint Checkpoint) error
}

// DeviceCopier copies by reading and writing the device files (copyDevice):
// the Manager's copier unless Config.Copier says otherwise.
type DeviceCopier struct{}

// Copy implements Copier.
func (DeviceCopier) Copy(ctx context.Context, src, dst string, from, size int64, checkpoint Checkpoint) error {
	return copyDevice(ctx, src, dst, from, size, checkpoint)
}

// copyDevice copies bytes [from, size) of device src to device dst, calls
// checkpoint between chunks, and flushes dst. Every byte is written, zeroes
// included: the destination's extents may hold whatever a former LV left
// there. The bytes before from were copied by an earlier, interrupted run
// (see progress.go).
func copyDevice(ctx context.Context, src, dst string, from, size int64, checkpoint Checkpoint) error {
	direct := size%directAlign == 0 && from%directAlign == 0
	in, inDirect, err := openForCopy(src, os.O_RDONLY, direct)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer func() { _ = in.Close() }()
	out, outDirect, err := openForCopy(dst, os.O_WRONLY, direct)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer func() { _ = out.Close() }()
	if err := seekBoth(in, out, from); err != nil {
		return fmt.Errorf("copy %s to %s from byte %d: %w", src, dst, from, err)
	}
	buf, free, err := copyBuffer(inDirect || outDirect)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer free()
	for done := from; done < size; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("copy %s to %s stopped at %d of %d bytes: %w", src, dst, done, size, err)
		}
		n := min(int64(len(buf)), size-done)
		if _, err := io.ReadFull(in, buf[:n]); err != nil {
			return fmt.Errorf("copy: read %s at %d: %w", src, done, err)
		}
		if _, err := out.Write(buf[:n]); err != nil {
			return fmt.Errorf("copy: write %s at %d: %w", dst, done, err)
		}
		if done += n; done < size {
			if err := checkpoint(done, out.Sync); err != nil {
				return fmt.Errorf("copy %s to %s at %d of %d bytes: %w", src, dst, done, size, err)
			}
		}
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("copy: flush %s: %w", dst, err)
	}
	return nil
}

// directAlign: O_DIRECT wants offsets, lengths and buffers aligned to the
// device's logical block; 4 KiB covers every device Carve copies (LVs
// are whole extents).
const directAlign = 4096

// openForCopy opens path for a copy, bypassing the page cache (O_DIRECT)
// when direct and the file allows it. Through the page cache a copy of a
// whole volume evicts everything else on the node and ran at a twentieth
// of dd's speed on the benchmark's VM (docs/performance.md); O_DIRECT
// streams each byte once, as `dd iflag=direct oflag=direct` does. A file
// that refuses O_DIRECT (EINVAL: tmpfs, some test files) is opened
// without it.
func openForCopy(path string, flag int, direct bool) (*os.File, bool, error) {
	if direct {
		f, err := os.OpenFile(path, flag|unix.O_DIRECT, 0)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, unix.EINVAL) {
			return nil, false, err
		}
	}
	f, err := os.OpenFile(path, flag, 0)
	return f, false, err
}

// copyBuffer is a chunk's buffer; for O_DIRECT, page-aligned memory of its
// own (an anonymous mapping), which free returns.
func copyBuffer(aligned bool) ([]byte, func(), error) {
	if !aligned {
		return make([]byte, copyChunk), func() {}, nil
	}
	buf, err := unix.Mmap(-1, 0, copyChunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("buffer for direct IO: %w", err)
	}
	return buf, func() { _ = unix.Munmap(buf) }, nil
}

func seekBoth(in, out *os.File, off int64) error {
	if _, err := in.Seek(off, io.SeekStart); err != nil {
		return err
	}
	_, err := out.Seek(off, io.SeekStart)
	return err
}

var errFrozenOverflow = errors.New("the source changed more than the frozen point's copy-on-write space could hold")

// errFrozenTorn: the frozen point was found active but not live
// (lvm.LV.Live), or not a snapshot of its volume at all, as lvm2 commands
// cut short leave it. lvs waits for
// the VG's lock, so it never sees another command's transient state:
// this is a leftover, and whether the source's writes since went through
// the frozen point's copy-on-write is unknown. Its image is not trusted:
// it is dropped, as an overflowed one is.
var errFrozenTorn = errors.New("the frozen point was left half made by an interrupted lvm2 command")

// tornImage tells the copy errors after which the frozen point is gone
// and the copy must start over from a new one.
func tornImage(err error) bool {
	return errors.Is(err, errFrozenOverflow) || errors.Is(err, errFrozenTorn)
}
