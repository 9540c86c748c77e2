package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
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
// the Manager's copier unless SetCopier says otherwise.
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
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer func() { _ = out.Close() }()
	if err := seekBoth(in, out, from); err != nil {
		return fmt.Errorf("copy %s to %s from byte %d: %w", src, dst, from, err)
	}
	buf := make([]byte, copyChunk)
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

func seekBoth(in, out *os.File, off int64) error {
	if _, err := in.Seek(off, io.SeekStart); err != nil {
		return err
	}
	_, err := out.Seek(off, io.SeekStart)
	return err
}

var errFrozenOverflow = errors.New("the source changed more than the frozen point's copy-on-write space could hold")
