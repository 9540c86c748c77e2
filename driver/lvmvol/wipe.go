package lvmvol

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
)

// defaultWipeChunk is how much one blkdiscard zeroes: each chunk is its own
// data command with a deadline sized for it (a hang shows within that), and
// progress can be recorded between chunks.
const defaultWipeChunk = 1 << 30

// sectorSize: BLKZEROOUT wants offsets and lengths in whole 512-byte
// sectors; LV sizes and chunks always are.
const sectorSize = 512

// ZeroWiper zeroes devices with `blkdiscard --zeroout`: the BLKZEROOUT ioctl,
// which uses the device's write-zeroes support where it has one (fast on
// NVMe and thin storage) and makes the kernel write zeroes where not. Unlike
// a plain discard, it guarantees that reads return zeroes afterwards.
type ZeroWiper struct {
	Run runner.Runner
}

// Zero zeroes length bytes of device from offset. It is data work (see
// lvm/runner): its deadline is sized for length, never --command-timeout.
func (w ZeroWiper) Zero(ctx context.Context, device string, offset, length int64) error {
	ctx, cancel := runner.DataWork(ctx, runner.DataBudget(length))
	defer cancel()
	if _, err := w.Run.Run(ctx, "blkdiscard", "--zeroout", "--offset", strconv.FormatInt(offset, 10),
		"--length", strconv.FormatInt(length, 10), device); err != nil {
		return fmt.Errorf("zero %s: %w", device, err)
	}
	return nil
}

// Flush makes the zeroes written to device so far durable: BLKZEROOUT is
// done once the device has taken the writes, which may still sit in its
// volatile cache; fsync on a block device flushes that cache.
func (w ZeroWiper) Flush(ctx context.Context, device string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("flush %s: %w", device, err)
	}
	f, err := os.OpenFile(device, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("flush %s: %w", device, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("flush %s: %w", device, err)
	}
	return nil
}

// wipe zeroes a thick LV over its whole length. It resumes where an
// interrupted wipe recorded its progress (see progress.go). The LV is left
// active: lvremove, next, deactivates it itself (and fails with ErrBusy if
// something opened it meanwhile, as a deactivation here would), so a
// separate lvchange -an would only cost one more lvm2 run per delete.
//
// activated tells that the caller has just activated lv (markDeleting, in
// the same lvchange as the deleting tag): then it needs no lvchange here.
// A report that merely says active is not enough: it may predate the end
// of a copy or of a create that deactivated the LV since (both run beside
// a delete), and activating an active LV costs one run, not a failure.
func (m *Manager) wipe(ctx context.Context, lv lvm.LV, activated bool, mt *meter) error {
	ref := lv.VGName + "/" + lv.Name
	if !activated {
		if err := m.lvm.Activate(ctx, lv.VGName, lv.Name); err != nil {
			return fmt.Errorf("activate %s to wipe it: %w", ref, err)
		}
	}
	start := time.Now()
	if err := m.zero(ctx, lv, mt); err != nil {
		return fmt.Errorf("wipe %s: %w", ref, err)
	}
	klog.InfoS("Wiped logical volume", "lv", ref, "bytes", lv.Size, "duration", time.Since(start))
	return nil
}

// zero zeroes lv chunk by chunk from its recorded progress on.
func (m *Manager) zero(ctx context.Context, lv lvm.LV, mt *meter) error {
	dev, size := devicePath(lv.VGName, lv.Name), int64(lv.Size)
	p := m.progressOf(lv, tagWipedPrefix, "")
	flush := func() error { return m.wiper.Flush(ctx, dev) }
	for done := p.resume(size, sectorSize); done < size; {
		mt.set(done)
		n := min(m.wipeChunk, size-done)
		if err := m.wiper.Zero(ctx, dev, done, n); err != nil {
			return fmt.Errorf("at byte %d of %d: %w", done, size, err)
		}
		// The last chunk needs no record: lvremove comes next, and a
		// crash before it redoes at most the work since the last record.
		if done += n; done < size {
			if err := p.checkpoint(ctx, done, flush); err != nil {
				return fmt.Errorf("at byte %d of %d: %w", done, size, err)
			}
		}
	}
	return nil
}
