//go:build vmtest

package lifecycle

import (
	"bytes"
	"crypto/rand"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// background runs a writer's loop on a new file in a goroutine until
// stopped; the loop's error is kept for halt.
type background struct {
	t       *testing.T
	stopped atomic.Bool
	wg      sync.WaitGroup
	err     error
}

// run creates path and runs loop on it, then closes it.
func (b *background) run(path string, loop func(f *os.File) error) {
	f, err := os.Create(path)
	must(b.t, err)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() { _ = f.Close() }()
		b.err = loop(f)
	}()
}

// halt stops the loop and waits for it; its error, or having done
// nothing (idle), fails the test.
func (b *background) halt(idle func() bool, during string) {
	b.t.Helper()
	b.stopped.Store(true)
	b.wg.Wait()
	if b.err != nil {
		b.t.Fatalf("write %s failed: %v", during, b.err)
	}
	if idle() {
		b.t.Fatalf("the writer did nothing %s", during)
	}
}

// rewriter rewrites a file of n bytes over and over, in 64 KiB blocks of
// fresh random bytes, fsyncing every MiB, at about 6 MiB/s (the VM has one
// core for it and lvm2): what it last wrote is what the file must hold.
type rewriter struct {
	background
	path   string
	mu     sync.Mutex
	want   []byte
	passes int
}

func startRewriter(t *testing.T, path string, n int) *rewriter {
	w := &rewriter{background: background{t: t}, path: path, want: make([]byte, n)}
	w.run(path, func(f *os.File) error {
		block := make([]byte, 64<<10)
		for off := 0; !w.stopped.Load(); off = (off + len(block)) % n {
			if err := w.rewrite(f, off, block); err != nil {
				return err
			}
			time.Sleep(10 * time.Millisecond)
		}
		return f.Sync()
	})
	return w
}

// rewrite writes fresh bytes at off, syncing at each MiB.
func (w *rewriter) rewrite(f *os.File, off int, block []byte) error {
	_, _ = rand.Read(block)
	w.mu.Lock()
	defer w.mu.Unlock()
	copy(w.want[off:], block)
	_, err := f.WriteAt(block, int64(off))
	if err == nil && (off+len(block))%(1<<20) == 0 {
		err = f.Sync()
	}
	if off+len(block) == len(w.want) {
		w.passes++
	}
	return err
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
	w.halt(func() bool { return w.passes == 0 }, "while converting")
	w.t.Logf("the writer rewrote %s %d times", w.path, w.passes)
	w.check()
	return w.want
}
