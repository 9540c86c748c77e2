package lvmvol

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
)

// A catch-up: the last step of a move's data (docs/moves.md). A volume of
// this node was restored from snapshot S1 of another node's volume while
// that volume stayed in use; once its workload has stopped, a snapshot S2
// is taken there, and this node receives only what changed between S1 and
// S2 (transfer.Request.Base), after which the volume holds S2.
//
// Why it is safe to write a volume that is settled: the controller holds
// a volume being moved (no ControllerPublish until the move is done), and
// the agent calls CatchUp only while it is published nowhere, so nothing
// else writes or reads it meanwhile.
//
// Crash safety and retries: every range the transfer writes holds S2's
// bytes once written, and every range it keeps already held them (S1 and
// S2 agree there), so a catch-up cut anywhere and done again from any
// earlier point ends with S2. Its progress is recorded as a copy's is
// (carve.dev/copied=S2:N, progress.go), keyed by S2, so a retry resumes
// at the last checked segment; a record of another snapshot is ignored.

// jobCatchUp is a catch-up's job kind (jobs.go).
const jobCatchUp = "catch-up"

// CatchUp brings volume vol, restored from another node's snapshot base,
// to snap, a later snapshot of the same volume on that node, receiving
// only what changed. It runs as a job, and answers as a copy does: a
// *PendingError while the job runs with Config.BackgroundDataWork; the
// call after the job's end is told how it ended (startKept: the volume
// shows no mark of it). Done again after that, or after a restart lost
// the job, it sends the delta again, which changes nothing.
func (m *Manager) CatchUp(ctx context.Context, vol, base, snap volume.ID) error {
	if m.remote == nil {
		return fmt.Errorf("%w: snapshot %s is on node %s, and this node receives no transfers", volume.ErrSnapshotNotFound, snap, snap.Node)
	}
	if base.Node == m.node || snap.Node != base.Node || snap == base {
		return fmt.Errorf("%w: a catch-up is from another node's later snapshot of one volume: base %s, snapshot %s",
			volume.ErrInvalidArgument, base, snap)
	}
	lv, err := m.lookupSettled(ctx, lvm.Fresh, vol)
	if err != nil {
		return err
	}
	if src := m.contentSourceOf(lv); src == nil || src.Kind != volume.SourceSnapshot || src.ID != base {
		return fmt.Errorf("%w: volume %s was not restored from snapshot %s: it cannot catch up from it",
			volume.ErrFailedPrecondition, vol, base)
	}
	key := jobKey(jobCatchUp, lv.VGName, lv.Name) + "@" + snap.String()
	size := int64(lv.Size)
	j, started := m.jobs.startKept(key, size, runner.DataBudget(size), func(ctx context.Context, mt *meter) error {
		return m.catchUp(ctx, lv, base, snap, mt)
	})
	return m.awaitData(ctx, key, jobCatchUp, lv, j, started)
}

// catchUp receives snap's changes since base into lv, from its last
// record on. The LV is held for it (hold: active and marked held, as a
// copy's source is), not merely activated: an active volume without the
// mark is a published one (isPublished), and the agent refuses to catch
// up a published volume, so a catch-up that outlasted its call's grace
// found its own activation at the next call, refused, and never ended
// (seen in the e2e's move). release deactivates it again, and a crash
// leaves the mark for the next catch-up's hold and release.
func (m *Manager) catchUp(ctx context.Context, lv lvm.LV, base, snap volume.ID, mt *meter) error {
	if err := m.hold(ctx, lvm.Fresh, lv); err != nil {
		return fmt.Errorf("catch-up target %s/%s: %w", lv.VGName, lv.Name, err)
	}
	defer func() {
		if err := m.release(context.WithoutCancel(ctx), lvm.Fresh, lv.VGName, lv.Name); err != nil {
			klog.ErrorS(err, "Catch-up target left held", "lv", lv.VGName+"/"+lv.Name)
		}
	}()
	start := time.Now()
	klog.InfoS("Catching up with another node's snapshot", "lv", lv.VGName+"/"+lv.Name, "base", base, "snapshot", snap)
	if _, err := m.receiveInto(ctx, lv, snap, base, mt); err != nil {
		return fmt.Errorf("catch-up of %s/%s from %s to %s: %w", lv.VGName, lv.Name, base, snap, err)
	}
	klog.InfoS("Caught up with another node's snapshot", "lv", lv.VGName+"/"+lv.Name, "snapshot", snap, "duration", time.Since(start))
	return nil
}
