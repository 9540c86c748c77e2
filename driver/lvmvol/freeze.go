package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/metrics"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// isPublished: in Carve an active volume is a published one, unless it is
// only held for a copy.
func isPublished(lv lvm.LV) bool { return lv.Active && !lv.HasTag(tagHeld) }

// hold activates an unpublished thick volume for a copy, marking it held
// first, so that a crash leaves a mark release can clean up.
//
// The caller's report may predate a publish (lockActivation): an inactive
// volume is read again under the lock, or it would be marked held while
// published, and the copy's release would deactivate it.
func (m *Manager) hold(ctx context.Context, r lvm.Reads, lv lvm.LV) error {
	if lv.Live() {
		return nil // published, or held already
	}
	unlock, err := m.lockActivation(ctx, lv.VGName, lv.Name)
	if err != nil {
		return err
	}
	defer unlock()
	now, err := m.lvm.GetLV(ctx, r, lv.VGName, lv.Name)
	if err != nil {
		return fmt.Errorf("hold %s/%s for a copy: %w", lv.VGName, lv.Name, err)
	}
	switch lv = now; {
	case lv.Live():
		return nil // published since
	case lv.Active:
		// Published or held, by an activation cut short (lvm.LV.Live):
		// complete it, and leave the mark as it is.
		if err := m.lvm.Activate(ctx, lv.VGName, lv.Name); err != nil {
			return fmt.Errorf("hold %s/%s for a copy: %w", lv.VGName, lv.Name, err)
		}
		return nil
	}
	if !lv.SkipActivation {
		// One lvchange: lvm2 commits the mark before it activates (see
		// lvm.RetagAndActivate), the order this needs.
		if err := m.lvm.RetagAndActivate(ctx, lv.VGName, lv.Name, []string{tagHeld}, nil, true); err != nil {
			return fmt.Errorf("hold %s/%s for a copy: %w", lv.VGName, lv.Name, err)
		}
		return nil
	}
	if err := m.lvm.AddTags(ctx, lv.VGName, lv.Name, tagHeld); err != nil {
		return fmt.Errorf("hold %s/%s for a copy: %w", lv.VGName, lv.Name, err)
	}
	if err := m.lvm.Activate(ctx, lv.VGName, lv.Name); err != nil {
		return fmt.Errorf("hold %s/%s for a copy: %w", lv.VGName, lv.Name, err)
	}
	return nil
}

// release undoes hold: deactivate, then drop the mark (a crash in between
// leaves a held, inactive volume, which hold and release both accept).
// A volume published meanwhile has lost its mark and stays active. One that
// still has a frozen point stays held: a copy still needs it.
func (m *Manager) release(ctx context.Context, r lvm.Reads, vg, name string) error {
	unlock, err := m.lockActivation(ctx, vg, name)
	if err != nil {
		return err
	}
	defer unlock()
	lv, err := m.lvm.GetLV(ctx, r, vg, name)
	if errors.Is(err, lvm.ErrNotFound) {
		return nil
	}
	if err != nil || !lv.HasTag(tagHeld) || lv.HasCOWSnapshots() {
		return err
	}
	if lv.Active {
		if err := m.lvm.Deactivate(ctx, vg, name); err != nil {
			return fmt.Errorf("release %s/%s after a copy: %w", vg, name, err)
		}
	}
	return m.lvm.RemoveTags(ctx, vg, name, tagHeld)
}

// cowSizeFor sizes the copy-on-write store that freezes a thick volume of
// size bytes: it must absorb every write the volume takes while the copy
// runs. A quarter of the volume (at least 64 MiB) covers ordinary write
// rates for the minutes a copy takes; a store as big as the volume plus
// its exception metadata could never overflow, and that is the cap. If it
// does overflow, the copy is thrown away and redone (errFrozenOverflow).
func cowSizeFor(size uint64) uint64 {
	return min(max(size/4, 64<<20), size+size/32+(4<<20))
}

// frozenChunk is a COW frozen point's chunk size. The copy reads the whole
// frozen point, and dm-snapshot splits each read into chunks: with lvm2's
// default of 4 KiB, reading 1 GiB of a frozen point took 2.87 s in the
// test VM against 0.34 s for the LV itself (dd, direct IO, 4 MiB blocks);
// with 64 KiB 0.57 s, with 256 KiB 0.31 s. The price is paid by writes to
// the volume while it is frozen: the first write to a chunk copies the
// whole chunk into the COW space (64 KiB for a 4 KiB write): the store
// above fills once writes have touched a quarter of the volume's chunks,
// not a quarter of its bytes. Hence 64 KiB, not more. The exception table
// shrinks as chunks grow: the cap above holds for every chunk size.
const frozenChunk = 64 << 10

// freeze makes, or finds from an interrupted earlier call, the frozen point
// of live volume src for copy target dst: a thin snapshot for a thin volume
// (instant, no space), a COW snapshot for a thick one.
//
// Its callers only need the frozen point to exist: they read it when they
// copy (copyFrozen). So it is made from src's report without a lookup of
// its name first and without a read-back: lvcreate fails on a frozen point
// left by an interrupted call having changed nothing, and that one is
// used, once adoptFrozen has found it whole. Holding src first is harmless
// then: it is what that earlier call did too, and release undoes it after
// the copy.
func (m *Manager) freeze(ctx context.Context, r lvm.Reads, src lvm.LV, dst string) error {
	name := frozenName(dst)
	o := lvm.SnapshotOptions{Tags: []string{tagFrozen}, SkipReadBack: true}
	var err error
	if src.PoolLV == "" {
		o.COWSize, o.ChunkSize = cowSizeFor(src.Size), frozenChunk
		err = m.hold(ctx, r, src)
	}
	if err == nil {
		_, err = m.snapshotLV(ctx, src, name, o)
	}
	if errors.Is(err, lvm.ErrAlreadyExists) {
		err = m.adoptFrozen(ctx, r, src, name, o)
	}
	if err != nil {
		return fmt.Errorf("freeze %s/%s: %w", src.VGName, src.Name, err)
	}
	return nil
}

// adoptFrozen checks the LV of the frozen point's name that an earlier,
// interrupted freeze left. A snapshot of src is that freeze's instant,
// and is kept. lvm2's lvcreate -s makes a COW store as a plain LV first,
// tags and all, zeroes its header, and only then turns it into the
// snapshot: killed in between (measured in the VM: SIGKILL 0.25 s into a
// 1 s lvcreate), it leaves an inactive plain LV of that name, tagged
// frozen, holding no copy of anything. Copying from it would make a
// snapshot of zeroes; the standalone soak found a copy failing to open
// one. It is removed and the freeze made again: nothing was copied from
// it, and the new instant is the one the retried call takes. So is a
// snapshot of src whose device the kill left active but not live
// (lvm.LV.Live): measured, an lvcreate -s of a raid1 volume killed 0.335 s
// in left the volume suspended with the snapshot's tables loaded but not
// live, and a copy from it read EOF at 0 in the soak.
func (m *Manager) adoptFrozen(ctx context.Context, r lvm.Reads, src lvm.LV, name string, o lvm.SnapshotOptions) error {
	lv, err := m.lvm.GetLV(ctx, r, src.VGName, name)
	if err != nil {
		return err
	}
	switch {
	case lv.Origin == src.Name && (!lv.Active || lv.Live()):
		return nil
	case lv.Origin == src.Name:
		// Made, but its device left half made by the kill (see
		// errFrozenTorn): whether it froze anything is unknown.
		klog.InfoS("Frozen point left half activated by an interrupted lvcreate -s: removing it and freezing again",
			"lv", lv.VGName+"/"+lv.Name, "attr", lv.Attr, "volume", src.Name)
	case !lv.HasTag(tagFrozen) || lv.HasTag(TagVolume):
		return fmt.Errorf("%w: LV %s/%s, in the way of a frozen point of %s, is not Carve's", volume.ErrFailedPrecondition, lv.VGName, lv.Name, src.Name)
	default:
		klog.InfoS("Frozen point left unfinished by an interrupted lvcreate -s (no snapshot of its volume): removing it and freezing again",
			"lv", lv.VGName+"/"+lv.Name, "volume", src.Name)
	}
	if err := m.lvm.RemoveLVOf(ctx, lv); err != nil {
		return fmt.Errorf("remove the interrupted frozen point %s/%s: %w", lv.VGName, lv.Name, err)
	}
	_, err = m.snapshotLV(ctx, src, name, o)
	return err
}

// copyLV copies size bytes of LV src into LV dst of the same VG, activating
// both as needed, and leaves src inactive afterwards unless it was active
// (a published volume stays published). It resumes from dst's progress
// record of this very src (its UUID), and records its own.
//
// target is dst's report, read by the caller since the job that runs the
// copy began or before: its progress records are written by that job
// alone (one job per target, see jobs.go), and an active target needs no
// activation.
func (m *Manager) copyLV(ctx context.Context, r lvm.Reads, src, target lvm.LV, size uint64, mt *meter) error {
	vg, dst := target.VGName, target.Name
	switch {
	case isSnapshot(src):
		// A snapshot rests inactive (nothing should write to it): it is
		// deactivated after the copy even when found active, which is
		// how a try cut short between this activation and that
		// deactivation leaves it (the crash suite's restore-thick).
		if !src.Live() {
			if err := m.lvm.Activate(ctx, vg, src.Name); err != nil {
				return fmt.Errorf("activate copy source %s/%s: %w", vg, src.Name, err)
			}
		}
		defer func() { _ = m.lvm.Deactivate(context.WithoutCancel(ctx), vg, src.Name) }()
	case src.Live():
	case src.IsCOWSnapshot():
		// A frozen point whose volume was deactivated after the freeze:
		// an unpublish runs beside the snapshot or clone (another object
		// in the agent) and may have looked before the frozen point
		// existed. lvm2 activates a COW snapshot only with its origin
		// (and refuses to without --yes), so hold the origin again, which
		// activates both; the copy's release lets it go.
		origin, err := m.lvm.GetLV(ctx, r, vg, src.Origin)
		if err != nil {
			return fmt.Errorf("copy source %s/%s: its origin: %w", vg, src.Name, err)
		}
		if err := m.hold(ctx, r, origin); err != nil {
			return fmt.Errorf("activate copy source %s/%s: %w", vg, src.Name, err)
		}
	default:
		if err := m.lvm.Activate(ctx, vg, src.Name); err != nil {
			return fmt.Errorf("activate copy source %s/%s: %w", vg, src.Name, err)
		}
		defer func() { _ = m.lvm.Deactivate(context.WithoutCancel(ctx), vg, src.Name) }()
	}
	if !target.Live() {
		if err := m.lvm.Activate(ctx, vg, dst); err != nil {
			return fmt.Errorf("activate copy target %s/%s: %w", vg, dst, err)
		}
	}
	p := m.progressOf(target, tagCopiedPrefix, src.UUID)
	from, record := int64(0), Checkpoint(func(int64, func() error) error { return nil })
	if src.UUID != "" { // lvm2 always reports one; without it no record could be tied to src
		from = p.resume(int64(size), sectorSize)
		record = func(done int64, flush func() error) error { return p.checkpoint(ctx, done, flush) }
	}
	mt.set(from)
	checkpoint := func(done int64, flush func() error) error {
		mt.set(done)
		return record(done, flush)
	}
	start := time.Now()
	if err := m.copier.Copy(ctx, devicePath(vg, src.Name), devicePath(vg, dst), from, int64(size), checkpoint); err != nil {
		return err
	}
	metrics.Copied(int64(size)-from, time.Since(start))
	p.clear(ctx)
	return nil
}

// copyFrozen copies the frozen point of target into target (see copyLV
// for target's report), then drops the frozen point. An overflowed COW
// store means the copy is not a consistent image: the frozen point is
// dropped and errFrozenOverflow returned.
func (m *Manager) copyFrozen(ctx context.Context, r lvm.Reads, target lvm.LV, origin string, size uint64, mt *meter) error {
	frozen, err := m.lvm.GetLV(ctx, r, target.VGName, frozenName(target.Name))
	if err != nil {
		return fmt.Errorf("frozen point of %s/%s: %w", target.VGName, target.Name, err)
	}
	return m.copyFrozenLV(ctx, r, frozen, target, origin, size, mt)
}

// copyFrozenLV is copyFrozen of the frozen point the caller has read;
// origin is the volume it must be a snapshot of.
//
// A frozen point that is no snapshot of origin, or active but not live,
// is no image Carve can trust (errFrozenTorn): it is removed, origin is
// released, and the copy starts over from a new one. The soak found a
// frozen point of a raid1 volume reported as a plain LV after kills
// during its copy: copied, it made a "ready" snapshot holding the COW
// store's header (DM_snapshot_cow) instead of the volume's data.
func (m *Manager) copyFrozenLV(ctx context.Context, r lvm.Reads, frozen, target lvm.LV, origin string, size uint64, mt *meter) error {
	if frozen.Origin != origin || frozen.Active && !frozen.Live() {
		if err := m.dropFrozenLV(ctx, r, frozen, origin); err != nil {
			return err
		}
		return fmt.Errorf("copy into %s/%s: %s (attr %s, origin %q, want %q): %w", target.VGName, target.Name,
			frozen.Name, frozen.Attr, frozen.Origin, origin, errFrozenTorn)
	}
	if err := m.copyLV(ctx, r, frozen, target, size, mt); err != nil {
		return err
	}
	// Read again: whether its COW store overflowed during the copy.
	after, err := m.lvm.GetLV(ctx, r, frozen.VGName, frozen.Name)
	if err != nil {
		return fmt.Errorf("frozen point of %s/%s: %w", target.VGName, target.Name, err)
	}
	if err := m.dropFrozenLV(ctx, r, after, after.Origin); err != nil {
		return err
	}
	if after.SnapshotInvalid {
		return fmt.Errorf("copy into %s/%s: %w", target.VGName, target.Name, errFrozenOverflow)
	}
	return nil
}
