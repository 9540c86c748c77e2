package lvmvol

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
)

// changeMirrors gives lv want extra raid1 legs (see ModifyVolume) and
// returns it as it is then: first the refusals, which change nothing;
// then, from what lvm2 reports now (never from what a crashed call meant
// to do), the steps of mirrorsChange in order. Each step reads the state
// the ones before it leave, and skips itself when that state is already
// its outcome, so a retry after a crash between any two steps, or inside
// one, goes on from where the volume is.
func (m *Manager) changeMirrors(ctx context.Context, r lvm.Reads, lv lvm.LV, want int) (lvm.LV, error) {
	if t := typeOf(lv); (t.IsThin() || t.Stripes > 1) && want == 0 {
		return lv, nil // what they have
	}
	if err := refuseMirrors(lv, want); err != nil {
		return lv, err
	}
	c, err := m.readMirrors(ctx, r, lv, want)
	if err != nil {
		return lv, err
	}
	if c.converted && c.recorded() && !c.held {
		if want > 0 && lv.Active {
			return m.waitSync(ctx, r, lv, true)
		}
		return lv, nil
	}
	if err := m.removeStrayLegs(ctx, lv); err != nil {
		return lv, err
	}
	vg, err := m.changeableVG(ctx, r, lv.VGName)
	if err != nil {
		return lv, err
	}
	if err := m.lvm.CheckConversion(ctx, vg, lv, c.have, want, typeOf(lv).Integrity); err != nil {
		return lv, err
	}
	for _, step := range []func(context.Context) error{c.recordMirrors, c.hold, c.convert, c.sync, c.release} {
		if err := step(ctx); err != nil {
			return c.lv, err
		}
	}
	if c.held || want == 0 {
		return m.lvm.GetLV(ctx, r, lv.VGName, lv.Name)
	}
	return c.lv, nil
}

// removeStrayLegs removes the legs a conversion of lv cut short left
// unlinked (lvm.Client.RemoveStrayRAIDParts), before the placement check
// reads the VG's free space, which they take: killed while lvm2 wiped
// them, the lvconvert committed them as LVs of their own, and lvm2
// refuses every conversion of lv while they are there
// (TestCutShortConversionIsConvertedAgain).
func (m *Manager) removeStrayLegs(ctx context.Context, lv lvm.LV) error {
	stray, err := m.lvm.RemoveStrayRAIDParts(ctx, lv.VGName, lv.Name)
	if err != nil {
		return err
	}
	if len(stray) > 0 {
		klog.InfoS("Removed the legs a cut-short conversion left unlinked; lvm2 refuses to convert the LV while they are there",
			"lv", lv.VGName+"/"+lv.Name, "stray", stray)
	}
	return nil
}

// refuseMirrors is changeMirrors' refusals, before any change: volumes
// that cannot take legs (thin, striped: INVALID_ARGUMENT), integrity that
// cannot go linear, a write cache, and work in progress on the volume
// that a conversion would race.
func refuseMirrors(lv lvm.LV, want int) error {
	t := typeOf(lv)
	if t.IsThin() || t.Stripes > 1 {
		kind := "thin"
		switch {
		case t.RAID != "":
			kind = t.RAID
		case !t.IsThin():
			kind = "striped"
		}
		return fmt.Errorf("%w: a %s volume cannot have raid1 legs (mirrors=%d); only thick linear and raid1 volumes can",
			volume.ErrInvalidArgument, kind, want)
	}
	switch {
	case t.Integrity && want == 0:
		// lvm2 2.03.16 gives new legs of a raid1 LV with integrity their
		// own, but refuses to make it linear ("Integrity must be removed
		// before converting raid to linear"), and Carve does not remove
		// integrity: a volume created with it keeps it.
		return fmt.Errorf("%w: a raid1 volume with integrity (raidIntegrity) cannot turn linear (mirrors=0); it may change its legs from 1 up",
			volume.ErrInvalidArgument)
	case lv.HasTag(tagCopying):
		return fmt.Errorf("its data is still being copied in, change it when that is done: %w", volume.ErrOperationPending)
	case lv.HasWriteCache() && want != t.Mirrors:
		return fmt.Errorf("%w: a volume with a write cache cannot change its raid1 legs (mirrors=%d): detach the cache first (writeCache=0)",
			volume.ErrInvalidArgument, want)
	case lv.HasCOWSnapshots():
		return fmt.Errorf("a copy reads it through a frozen point, change it when that is done: %w", volume.ErrOperationPending)
	}
	return nil
}

// mirrorsChange is a conversion's state, as the steps read and leave it:
//
//	step           reads                     leaves
//	recordMirrors  the mirrors tag, Active   mirrors=want; held, if unpublished
//	hold           Live                      the LV active (held: no reader sees it)
//	convert        have (lvm2's images)      have == want
//	sync           the legs' sync            the legs in sync
//	release        held                      unheld, inactive unless published
//
// A crash after recordMirrors leaves the tag ahead of the images: the
// retry counts the images, not the tag, and converts. After hold, the
// held tag and the active LV tell the retry to go on and to release at
// the end. Inside convert, lvm2 has committed its metadata in steps: an
// LV raid1 with fewer images than asked (or one, for a linear target) is
// converted on from there, and lvm2 answers an LV that has the count
// with a warning only. During sync, the retry finds the count right and
// waits. test/crash kills carve after every command of this and compares
// each retry's outcome with an uninterrupted call's.
type mirrorsChange struct {
	m         *Manager
	r         lvm.Reads
	lv        lvm.LV
	want      int
	have      int  // raid1 images lvm2 reports, less one
	converted bool // have is want, and a linear target is no longer raid
	held      bool // by this conversion, or by one cut short: released at the end
}

// readMirrors reads what the volume has: its images from lvm2, the hold
// from its tag.
func (m *Manager) readMirrors(ctx context.Context, r lvm.Reads, lv lvm.LV, want int) (*mirrorsChange, error) {
	all, err := m.lvm.ListAllLVs(ctx, r, lv.VGName)
	if err != nil {
		return nil, err
	}
	have := lvm.Mirrors(all, lv.Name)
	return &mirrorsChange{m: m, r: r, lv: lv, want: want, have: have,
		converted: have == want && (want > 0 || !strings.HasPrefix(lv.Layout, "raid")),
		held:      lv.HasTag(tagHeld)}, nil
}

// recorded says whether the mirrors tag already names the target.
func (c *mirrorsChange) recorded() bool { return typeOf(c.lv).Mirrors == c.want }

// recordMirrors: one lvchange records the target and, for an unpublished
// volume, the hold (as hold does: the mark goes on before the
// activation, so no reader takes the volume for published).
func (c *mirrorsChange) recordMirrors(ctx context.Context) error {
	var add, remove []string
	if !c.recorded() {
		add, remove = mirrorsTags(c.want), mirrorsTags(typeOf(c.lv).Mirrors)
	}
	if !c.lv.Active && !c.held {
		add = append(add, tagHeld)
	}
	if len(add)+len(remove) == 0 {
		return nil
	}
	if err := c.m.lvm.ChangeTags(ctx, c.lv.VGName, c.lv.Name, add, remove); err != nil {
		return fmt.Errorf("record %d mirrors: %w", c.want, err)
	}
	return nil
}

// hold activates an LV that is not live: lvm2 converts only active LVs.
func (c *mirrorsChange) hold(ctx context.Context) error {
	if c.lv.Live() {
		return nil
	}
	if err := c.m.lvm.Activate(ctx, c.lv.VGName, c.lv.Name); err != nil {
		return fmt.Errorf("hold %s/%s for a conversion: %w", c.lv.VGName, c.lv.Name, err)
	}
	c.held = c.held || !c.lv.Active
	return nil
}

// convert runs lvconvert when the images differ from the target. It is
// detached from the caller: cut short, it would leave lvm2 mid-way for
// the retry to sort out.
func (c *mirrorsChange) convert(ctx context.Context) error {
	if c.converted {
		return nil
	}
	work, done := runner.DataWork(context.WithoutCancel(ctx), runner.DataBudget(int64(c.lv.Size)))
	err := c.m.lvm.ConvertMirrors(work, c.lv.VGName, c.lv.Name, c.want)
	done()
	if err != nil {
		return err
	}
	klog.InfoS("Converted logical volume", "lv", c.lv.VGName+"/"+c.lv.Name, "mirrors", c.want, "from", c.have)
	return nil
}

// sync waits for new legs to be in sync (see waitSync: ErrDataPending
// when the caller's time ends first).
func (c *mirrorsChange) sync(ctx context.Context) (err error) {
	if c.want > 0 {
		c.lv, err = c.m.waitSync(ctx, c.r, c.lv, false)
	}
	return err
}

// release gives back a hold: the volume deactivated unless a publish
// took the activation over meanwhile (see release).
func (c *mirrorsChange) release(ctx context.Context) error {
	if !c.held {
		return nil
	}
	return c.m.release(ctx, c.r, c.lv.VGName, c.lv.Name)
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
