// Package lvm drives lvm2: typed reports (sizes in bytes), creating,
// extending, activating, tagging and removing logical volumes. It knows
// nothing about CSI or Kubernetes.
//
// Volume types: linear, striped and raid1 LVs, thin pools and thin LVs
// (create.go, thin.go), thin and COW snapshots (snapshot.go). Footprint
// and CheckPlacement (placement.go) tell whether a thick LV fits before
// lvcreate is asked.
//
// Every command is `lvm <subcommand> ...` run through a runner.Runner, so
// there is one binary to find, one timeout policy and one place that logs.
// Names and tags are validated before any command runs.
package lvm

import (
	"context"

	"carve.dev/carve/lvm/runner"
)

// lvmBinary is lvm2's multi-call binary; lvs, lvcreate... are symlinks to it.
const lvmBinary = "lvm"

// Client runs lvm2 commands.
type Client struct {
	r runner.Runner
	// thin remembers the thin pools checked for a cut command's leftovers
	// (thinrepair.go); lockDir caches lvm2's locking dir (vglock.go).
	thin    thinGuard
	lockDir lockDirCache
	// metaSnaps serialises reads of thin pools' metadata snapshots
	// (thinblocks.go).
	metaSnaps metaSnapLocks
}

// New returns a Client that runs lvm2 through r.
func New(r runner.Runner) *Client {
	return &Client{r: r}
}

// run executes `lvm args...` and classifies a failure (ErrNotFound,
// ErrNoSpace, ...) from lvm2's stderr. A changing command cut short
// (killed when its time or its caller's ran out) is followed by the
// repair of what it may have left (afterCut). The commands of a snapshot
// made with SnapshotOptions.SuspendedLayers get lvm2's setting to skip
// suspended devices (withSuspendedLayers).
func (c *Client) run(ctx context.Context, args ...string) ([]byte, error) {
	args = withScanConfig(ctx, args)
	out, err := c.r.Run(ctx, lvmBinary, args...)
	if err != nil && cut(err) && len(args) > 0 && changing[args[0]] && ctx.Value(repairingKey{}) == nil {
		c.afterCut(ctx, args)
	}
	return out, classify(err)
}
