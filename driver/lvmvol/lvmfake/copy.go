package lvmfake

import (
	"context"
	"fmt"

	"carve.dev/carve/driver/lvmvol"
)

var _ lvmvol.Copier = (*LVM)(nil)

// Copy stands for lvmvol.DeviceCopier over the fake's LVs (give it to
// Manager.SetCopier): it checks that both devices are active LVs, records
// the range copied in Copied, and reports a checkpoint halfway. While
// HoldCopies holds them, a copy then waits to be released (or for its
// context to end), so that tests can look at what happens meanwhile. Its
// call is named "Copy".
func (f *LVM) Copy(ctx context.Context, src, dst string, from, size int64, checkpoint lvmvol.Checkpoint) error {
	gate, err := f.startCopy(src, dst, from, size)
	if err != nil {
		return err
	}
	if half := from + (size-from)/2/512*512; half > from {
		if err := checkpoint(half, func() error { return nil }); err != nil {
			return err
		}
	}
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("copy %s to %s: %w", src, dst, ctx.Err())
	}
}

func (f *LVM) startCopy(src, dst string, from, size int64) (<-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("Copy"); err != nil {
		return nil, err
	}
	for _, dev := range []string{src, dst} {
		if _, err := f.activeDevice(dev); err != nil {
			return nil, fmt.Errorf("copy %s to %s: %s: %w", src, dst, dev, err)
		}
	}
	f.Copied = append(f.Copied, Range{Device: dst, Offset: from, Length: size - from})
	return f.copyGate, nil
}

// HoldCopies makes copies wait until release is called.
func (f *LVM) HoldCopies() (release func()) {
	gate := make(chan struct{})
	f.mu.Lock()
	f.copyGate = gate
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.copyGate == gate {
			f.copyGate = nil
			close(gate)
		}
	}
}

// CopiedRanges returns the ranges copied so far (safe while copies run).
func (f *LVM) CopiedRanges() []Range {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Range(nil), f.Copied...)
}
