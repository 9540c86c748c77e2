package lvmvol

import (
	"context"
	"fmt"

	"carve.dev/carve/lvm/runner"
)

// ZeroWiper zeroes devices with `blkdiscard --zeroout`: the BLKZEROOUT ioctl,
// which uses the device's write-zeroes support where it has one (fast on
// NVMe and thin storage) and makes the kernel write zeroes where not. Unlike
// a plain discard, it guarantees that reads return zeroes afterwards.
type ZeroWiper struct {
	Run runner.Runner
}

// Wipe zeroes device over its whole length.
func (w ZeroWiper) Wipe(ctx context.Context, device string) error {
	if _, err := w.Run.Run(ctx, "blkdiscard", "--zeroout", device); err != nil {
		return fmt.Errorf("zero %s: %w", device, err)
	}
	return nil
}
