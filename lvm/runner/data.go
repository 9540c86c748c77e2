package runner

import (
	"context"
	"time"
)

// Commands come in two classes.
//
// Metadata commands (lvm, blkid, blockdev) take about a second whatever the
// size of a volume. Exec.Timeout (--command-timeout) bounds each of them, so
// that a hang (a stuck device, a lock held by a dead process) ends soon.
//
// Data commands (zeroing, mkfs, fsck, filesystem growth) take time in
// proportion to the bytes they touch: a large volume on a slow device
// legitimately needs hours, and a timeout meant for metadata would kill
// every attempt from the start. A data command runs under the context that
// DataWork returns, and only that context's deadline bounds it, never
// Exec.Timeout. Callers size the deadline for the work (DataBudget).

// DataFloor is the least time a data command gets, whatever its size:
// process start, opening and flushing the device, a busy machine.
const DataFloor = 10 * time.Minute

// MinDataRate is the slowest throughput, in bytes per second, that data
// work is expected to keep up: well below what a disk that still works
// sustains (a busy HDD writes zeroes at 50 MB/s and more), so that only a
// hang, not a slow device, runs out of budget.
const MinDataRate = 8 << 20

// DataBudget is the deadline for data work on n bytes: DataFloor plus n at
// MinDataRate (1 GiB: 12 min 8 s; 1 TiB: about 36 h).
func DataBudget(n int64) time.Duration {
	return DataFloor + time.Duration(max(n, 0)/MinDataRate)*time.Second
}

type dataKey struct{}

// dataMark identifies the one context that DataWork returned.
type dataMark struct{ ctx context.Context }

// DataWork returns the context for data commands: they run until budget
// has passed (or parent ends), never cut by Exec.Timeout.
//
// The class belongs to exactly the returned context: a context derived
// from it is metadata again. So the lvm commands around some data work
// (activate, tag, deactivate), which share its context, keep their short
// timeout, and a data deadline cannot leak into them.
func DataWork(parent context.Context, budget time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, budget)
	m := &dataMark{}
	m.ctx = context.WithValue(ctx, dataKey{}, m)
	return m.ctx, cancel
}

// isData tells a context DataWork returned.
func isData(ctx context.Context) bool {
	m, ok := ctx.Value(dataKey{}).(*dataMark)
	return ok && m.ctx == ctx
}
