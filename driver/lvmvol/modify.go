package lvmvol

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
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
// changing command, and a retry after a crash anywhere converges: a
// refusal (the volume's type, placement) comes before any change, and
// the steps after it, with the state each reads and leaves and what a
// crash inside each leaves to its retry, are mirrorsChange's
// (mirrors.go).
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
