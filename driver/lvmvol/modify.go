package lvmvol

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
)

// ModifyVolume brings a volume to the mutable state want (CSI's
// ControllerModifyVolume); nil fields stay as they are. It returns once
// the volume is there: for new raid1 legs, once they are in sync.
//
// # Redundancy: mirrors
//
// A thick linear volume becomes raid1 with N extra legs, a raid1 volume
// gains or drops legs, and mirrors 0 makes it linear again, all with
// lvconvert while the volume stays active, mounted and written: the
// kernel copies the data onto a new leg in the background, and the
// volume's data never moves off its first leg. Thin and striped volumes
// cannot take legs (INVALID_ARGUMENT: the volume does not support the
// parameter, which a CO takes as final, not as something to retry);
// asking them for 0 legs is what they have, so it succeeds. Legs that
// the VG cannot place on PVs of their own are RESOURCE_EXHAUSTED before
// lvconvert runs (lvm.CheckConversion).
//
// lvm2 converts only active LVs. An unpublished volume is held for the
// conversion (as hold does for a copy: tagged carve.dev/held, in the
// lvchange that records the target, then activated, so that it stays
// unpublished to every reader) and released once its legs are in sync; a
// publish meanwhile takes the activation over, as for a copy. lvconvert
// runs as data work (runner.DataWork, sized for the volume, detached from
// the caller), never under the metadata timeout.
//
// # Idempotency and crashes
//
// The tag carve.dev/mirrors= records the legs the volume was last asked
// for, and is set before lvconvert (intent first, as everywhere in
// Carve); lvm2's raid images are what the volume has. ModifyVolume never
// trusts the tag to decide: it counts the images every time and converts
// only when they differ from the target, so the same call twice runs no
// changing command, and a retry after a crash anywhere converges (test/crash
// kills carve after every command of it and compares the retry's outcome
// with an uninterrupted call's):
//   - a refusal (the volume's type, placement) comes before any change;
//   - after the tag, before lvconvert: the images differ, lvconvert runs;
//   - during lvconvert: lvm2 commits its metadata in steps, and an LV left
//     raid1 with fewer images than asked (or with one, for a linear
//     target) is converted on from there; lvm2 answers an LV that already
//     has the count with a warning only;
//   - while the new legs sync: the retry finds the count right and waits
//     for the sync (or, its caller's time up, says how far it is:
//     ABORTED, in progress);
//   - held and not yet released: the retry releases it at its end.
//
// The tag is wrong only between such a crash and its retry (a CO retries
// a failed modification until it succeeds or the class changes, and the
// next modification converges again); expansion reads it to size the room
// a raid1 needs, and lvm2 itself refuses an extension that does not fit
// whatever the tag said.
func (m *Manager) ModifyVolume(ctx context.Context, id volume.ID, want volume.Mutable) (volume.Volume, error) {
	lv, err := m.lookupSettled(ctx, lvm.Fresh, id)
	if err != nil {
		return volume.Volume{}, err
	}
	if want.ChangesLimits() {
		if lv, err = m.changeLimits(ctx, lvm.Fresh, lv, want); err != nil {
			return volume.Volume{}, fmt.Errorf("modify %s: %w", id, err)
		}
	}
	// A cached volume's legs cannot change (lvm2 refuses): a cache going
	// away goes first, a cache coming comes onto the new layout.
	steps := []func() error{
		func() error { return m.modifyMirrors(ctx, lvm.Fresh, &lv, want.Mirrors) },
		func() error { return m.modifyWriteCache(ctx, lvm.Fresh, &lv, want.WriteCache) },
	}
	if want.WriteCache != nil && want.WriteCache.Size == 0 {
		steps[0], steps[1] = steps[1], steps[0]
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return volume.Volume{}, fmt.Errorf("modify %s: %w", id, err)
		}
	}
	return m.volumeOf(lv), nil
}

// modifyMirrors and modifyWriteCache are ModifyVolume's steps: each
// changes *lv as want asks, nothing for nil.
func (m *Manager) modifyMirrors(ctx context.Context, r lvm.Reads, lv *lvm.LV, want *int) (err error) {
	if want != nil {
		*lv, err = m.changeMirrors(ctx, r, *lv, *want)
	}
	return err
}

func (m *Manager) modifyWriteCache(ctx context.Context, r lvm.Reads, lv *lvm.LV, want *volume.WriteCache) (err error) {
	if want != nil {
		*lv, err = m.changeWriteCache(ctx, r, *lv, *want)
	}
	return err
}

// LimitsApplier puts a published volume's IO limits, as its LV records
// them now, on every pod of this node that uses it (the node's side of
// ModifyVolume: csi.Node.ApplyLimits, given as Config.ApplyLimits).
//
// It is a call from this layer up into the node's, and it stays one:
// the limits are applied in ModifyVolume's order of steps, after their
// tags are recorded and before the legs and the cache change, and a
// failure to apply stops the modification there (changeLimits). Only the
// Manager sees that order; its callers (the CSI controller in standalone
// mode, the node agent in cluster mode) could only apply after every
// step, each on its own.
type LimitsApplier func(ctx context.Context, id volume.ID) error

// changeLimits records the IO limits want names on lv (its tags, see
// limitTags) and has the node apply them to the pods using the volume
// now; pods it is published to later read the tags. The tags go first: a
// crash after them and before the node applied them leaves the new
// limits recorded, and the retry, finding the tags right, applies them
// all the same. Applying is idempotent (io.max takes the same line
// again), so it runs on every call that names a limit.
func (m *Manager) changeLimits(ctx context.Context, r lvm.Reads, lv lvm.LV, want volume.Mutable) (lvm.LV, error) {
	limits := want.Limits(limitsOf(lv))
	have, next := limitTags(limitsOf(lv)), limitTags(limits)
	add, remove := missingFrom(next, have), missingFrom(have, next)
	if len(add)+len(remove) > 0 {
		if err := m.lvm.ChangeTags(ctx, lv.VGName, lv.Name, add, remove); err != nil {
			return lv, fmt.Errorf("record IO limits: %w", err)
		}
		fresh, err := m.lvm.GetLV(ctx, r, lv.VGName, lv.Name)
		if err != nil {
			return lv, err
		}
		lv = fresh
		klog.InfoS("Recorded IO limits", "lv", lv.VGName+"/"+lv.Name, "limits", limits)
	}
	if m.applyLimits != nil && isPublished(lv) {
		if err := m.applyLimits(ctx, m.volumeOf(lv).ID); err != nil {
			return lv, fmt.Errorf("apply IO limits: %w", err)
		}
	}
	return lv, nil
}

// missingFrom is the strings of a that b lacks.
func missingFrom(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// changeMirrors gives lv want extra raid1 legs (see ModifyVolume) and
// returns it as it is then.
func (m *Manager) changeMirrors(ctx context.Context, r lvm.Reads, lv lvm.LV, want int) (lvm.LV, error) {
	t := typeOf(lv)
	if t.IsThin() || t.Stripes > 1 {
		if want == 0 {
			return lv, nil
		}
		kind := "thin"
		switch {
		case t.RAID != "":
			kind = t.RAID
		case !t.IsThin():
			kind = "striped"
		}
		return lv, fmt.Errorf("%w: a %s volume cannot have raid1 legs (mirrors=%d); only thick linear and raid1 volumes can",
			volume.ErrInvalidArgument, kind, want)
	}
	if t.Integrity && want == 0 {
		// lvm2 2.03.16 gives new legs of a raid1 LV with integrity their
		// own, but refuses to make it linear ("Integrity must be removed
		// before converting raid to linear"), and Carve does not remove
		// integrity: a volume created with it keeps it.
		return lv, fmt.Errorf("%w: a raid1 volume with integrity (raidIntegrity) cannot turn linear (mirrors=0); it may change its legs from 1 up",
			volume.ErrInvalidArgument)
	}
	if lv.HasTag(tagCopying) {
		return lv, fmt.Errorf("its data is still being copied in, change it when that is done: %w", volume.ErrOperationPending)
	}
	if lv.HasWriteCache() && want != t.Mirrors {
		return lv, fmt.Errorf("%w: a volume with a write cache cannot change its raid1 legs (mirrors=%d): detach the cache first (writeCache=0)",
			volume.ErrInvalidArgument, want)
	}
	if lv.HasCOWSnapshots() {
		return lv, fmt.Errorf("a copy reads it through a frozen point, change it when that is done: %w", volume.ErrOperationPending)
	}
	all, err := m.lvm.ListAllLVs(ctx, r, lv.VGName)
	if err != nil {
		return lv, err
	}
	have := lvm.Mirrors(all, lv.Name)
	converted := have == want && (want > 0 || !strings.HasPrefix(lv.Layout, "raid"))
	held := lv.HasTag(tagHeld) // by a conversion cut short: released at the end
	if converted && t.Mirrors == want && !held {
		if want > 0 && lv.Active {
			return m.waitSync(ctx, r, lv, true)
		}
		return lv, nil
	}
	vg, err := m.changeableVG(ctx, r, lv.VGName)
	if err != nil {
		return lv, err
	}
	if err := m.lvm.CheckConversion(ctx, vg, lv, have, want, t.Integrity); err != nil {
		return lv, err
	}
	// One lvchange records the target and, for an unpublished volume, the
	// hold (see hold: the mark goes on before the activation).
	var add, remove []string
	if t.Mirrors != want {
		add, remove = mirrorsTags(want), mirrorsTags(t.Mirrors)
	}
	if !lv.Active && !held {
		add = append(add, tagHeld)
	}
	if len(add)+len(remove) > 0 {
		if err := m.lvm.ChangeTags(ctx, lv.VGName, lv.Name, add, remove); err != nil {
			return lv, fmt.Errorf("record %d mirrors: %w", want, err)
		}
	}
	if !lv.Live() {
		if err := m.lvm.Activate(ctx, lv.VGName, lv.Name); err != nil {
			return lv, fmt.Errorf("hold %s/%s for a conversion: %w", lv.VGName, lv.Name, err)
		}
		held = held || !lv.Active
	}
	if !converted {
		// lvconvert is detached from the caller: cut short, it would
		// leave lvm2 mid-way for the retry to sort out.
		work, done := runner.DataWork(context.WithoutCancel(ctx), runner.DataBudget(int64(lv.Size)))
		err := m.lvm.ConvertMirrors(work, lv.VGName, lv.Name, want)
		done()
		if err != nil {
			return lv, err
		}
		klog.InfoS("Converted logical volume", "lv", lv.VGName+"/"+lv.Name, "mirrors", want, "from", have)
	}
	if want > 0 {
		if lv, err = m.waitSync(ctx, r, lv, false); err != nil {
			return lv, err
		}
	}
	if held {
		if err := m.release(ctx, r, lv.VGName, lv.Name); err != nil {
			return lv, err
		}
	}
	if held || want == 0 {
		return m.lvm.GetLV(ctx, r, lv.VGName, lv.Name)
	}
	return lv, nil
}

// mirrorsTags is the tag that records n mirrors: none for 0.
func mirrorsTags(n int) []string {
	if n == 0 {
		return nil
	}
	return []string{tagMirrorsPrefix + strconv.Itoa(n)}
}

// syncPoll is how often waitSync reads lvm2's sync report: each read is
// an lvs, about a second on a slow node.
const syncPoll = time.Second

// waitSync waits until the raid1 legs of an active LV are in sync and
// returns it then; fresh says lv was read in this call, so that an LV in
// sync costs no read. When ctx ends first, or with BackgroundDataWork
// (the node agent) its grace, it says how far they are (ErrDataPending:
// the retry waits on); a sync that outlasts the data budget of the LV's
// size is an error.
func (m *Manager) waitSync(ctx context.Context, r lvm.Reads, lv lvm.LV, fresh bool) (lvm.LV, error) {
	budget := runner.DataBudget(int64(lv.Size))
	deadline := time.Now().Add(budget)
	var graceUp <-chan time.Time
	if m.background {
		graceUp = time.After(m.dataGrace)
	}
	cur := lv
	for {
		if !fresh {
			var err error
			if cur, err = m.lvm.GetLV(ctx, r, lv.VGName, lv.Name); err != nil {
				return lv, fmt.Errorf("raid1 sync of %s/%s: %w", lv.VGName, lv.Name, err)
			}
		}
		fresh = false
		if cur.SyncPercent >= 100 && (cur.SyncAction == "idle" || cur.SyncAction == "") {
			return cur, nil
		}
		if time.Now().After(deadline) {
			return cur, fmt.Errorf("raid1 sync of %s/%s at %.1f%% after %s", lv.VGName, lv.Name, cur.SyncPercent, budget)
		}
		pending := &volume.PendingError{Work: volume.WorkSync, LV: lv.VGName + "/" + lv.Name,
			Done: int64(math.Ceil(cur.SyncPercent / 100 * float64(lv.Size))), Total: int64(lv.Size)}
		select {
		case <-ctx.Done():
			return cur, pending
		case <-graceUp:
			return cur, pending
		case <-time.After(syncPoll):
		}
	}
}
