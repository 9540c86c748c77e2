package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
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

// copies tracks the background copies of this process (thick snapshots), so
// that a retry waits for a running copy instead of starting a second one,
// and a delete can stop it. What a copy has achieved is recorded in LV tags,
// not here: after a restart the next call finds the copying tag and resumes
// the copy from its frozen source where its progress record says.
type copies struct {
	mu      sync.Mutex
	running map[string]*copyJob
}

type copyJob struct {
	done   chan struct{}
	err    error
	cancel context.CancelFunc
}

// start runs fn in the background under key, with budget to finish,
// unless a copy of key runs already; either way it returns the job.
func (c *copies) start(key string, budget time.Duration, fn func(ctx context.Context) error) *copyJob {
	c.mu.Lock()
	defer c.mu.Unlock()
	if j, ok := c.running[key]; ok {
		return j
	}
	if c.running == nil {
		c.running = map[string]*copyJob{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	j := &copyJob{done: make(chan struct{}), cancel: cancel}
	c.running[key] = j
	go func() {
		defer cancel()
		j.err = fn(ctx)
		if j.err != nil {
			klog.ErrorS(j.err, "Background copy failed; the next call retries it", "target", key)
		}
		c.mu.Lock()
		delete(c.running, key)
		c.mu.Unlock()
		close(j.done)
	}()
	return j
}

// wait blocks until the job ends or ctx does.
func (j *copyJob) wait(ctx context.Context) error {
	select {
	case <-j.done:
		return j.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for a data copy: %w", ctx.Err())
	}
}

// stop cancels the copy of key, if one runs, and waits for it to end.
func (c *copies) stop(key string) {
	c.mu.Lock()
	j, ok := c.running[key]
	c.mu.Unlock()
	if ok {
		j.cancel()
		<-j.done
	}
}

var errFrozenOverflow = errors.New("the source changed more than the frozen point's copy-on-write space could hold")
