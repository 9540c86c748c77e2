package lvmfake

import (
	"context"
	"fmt"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/lvm"
)

var _ lvmvol.Copier = (*LVM)(nil)

// Copy stands for lvmvol.DeviceCopier over the fake's LVs (give it to
// lvmvol.Config.Copier): it checks that both devices are active LVs, records
// the range copied in Copied, holds both open while it runs, and reports a
// checkpoint halfway. While
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
		f.endCopy(src, dst)
		return nil
	}
	defer f.endCopy(src, dst)
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("copy %s to %s: %w", src, dst, ctx.Err())
	}
}

// endCopy closes the devices startCopy opened.
func (f *LVM) endCopy(src, dst string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, dev := range []string{src, dst} {
		if lv, err := f.activeDevice(dev); err == nil {
			lv.Open = false
		}
	}
}

func (f *LVM) startCopy(src, dst string, from, size int64) (<-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("Copy"); err != nil {
		return nil, err
	}
	var open []*lvm.LV
	for _, dev := range []string{src, dst} {
		lv, err := f.activeDevice(dev)
		if err != nil {
			return nil, fmt.Errorf("copy %s to %s: %s: %w", src, dst, dev, err)
		}
		open = append(open, lv)
	}
	// The copy holds both devices open, as DeviceCopier does.
	for _, lv := range open {
		lv.Open = true
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
