package lvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// lockPoll is how often a VG lock held by an lvm2 command is tried again.
const lockPoll = 50 * time.Millisecond

// lockVGShared takes lvm2's own lock of vg, shared, and returns its
// release. lvm2 (file locking, the default without lvmlockd) flocks
// <locking_dir>/V_<vg>: shared for reports, exclusive from a changing
// command's read of the VG to its commit and resume. Holding it shared,
// Carve sees no lvm2 command of vg half way (its kernel state ahead of its
// metadata for a moment, as a thin pool's transaction id is between
// messages and commit). Measured (lvm2 2.03.16): an lvcreate waited out a
// shared flock of V_vg; a plain lvs did not, but did wait once such an
// lvcreate was queued, so under this lock Carve reads with lvs
// --readonly (see readThinPool).
//
// lvm2 unlinks a lock file it can lock exclusively on release, so the file
// locked must still be the one at the path (as lvm2's own flock does).
func (c *Client) lockVGShared(ctx context.Context, vg string) (func(), error) {
	if err := ValidateVGName(vg); err != nil {
		return nil, err
	}
	dir, err := c.lockingDir(ctx)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "V_"+vg)
	for {
		f, err := flockShared(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("lock VG %s (%s): %w", vg, path, err)
		}
		if sameFile(f, path) {
			return func() { _ = f.Close() }, nil // closing releases the flock
		}
		_ = f.Close() // unlinked by lvm2 meanwhile: lock the new one
	}
}

// flockShared opens path (creating it and its directory, as lvm2 does:
// a fresh /run has neither) and waits for a shared flock of it until ctx
// ends.
func flockShared(ctx context.Context, path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("held by an lvm2 command: %w", ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

func sameFile(f *os.File, path string) bool {
	open, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && os.SameFile(open, now)
}

// lockDirCache holds lvm2's locking dir once read: lvm.conf is read by
// every lvm2 command, but Carve's does not change while it runs.
type lockDirCache struct {
	mu  sync.Mutex
	dir string
}

// lockingDir asks lvm2 where its lock files are (global/locking_dir, with
// the default when lvm.conf leaves it unset): a private configuration
// (WritePrivateConfig) moves them.
func (c *Client) lockingDir(ctx context.Context) (string, error) {
	c.lockDir.mu.Lock()
	defer c.lockDir.mu.Unlock()
	if c.lockDir.dir != "" {
		return c.lockDir.dir, nil
	}
	out, err := c.run(ctx, "lvmconfig", "--typeconfig", "full", "global/locking_dir")
	if err != nil {
		return "", fmt.Errorf("lvmconfig global/locking_dir: %w", err)
	}
	dir, err := parseLockingDir(string(out))
	if err == nil {
		c.lockDir.dir = dir
	}
	return dir, err
}

// parseLockingDir reads `locking_dir="/run/lock/lvm"`.
func parseLockingDir(out string) (string, error) {
	v, ok := strings.CutPrefix(strings.TrimSpace(out), `locking_dir="`)
	v, closed := strings.CutSuffix(v, `"`)
	if !ok || !closed || !filepath.IsAbs(v) || strings.ContainsAny(v, "\"\n") || filepath.Clean(v) != v {
		return "", fmt.Errorf("lvmconfig: unexpected locking_dir %q", out)
	}
	return v, nil
}
