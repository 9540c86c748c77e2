package lvm

import (
	"context"
	"fmt"
	"slices"
)

// ErrHasDependents refuses to remove an LV that lvremove would take other
// LVs down with (the COW snapshots of an origin, the thin volumes of a
// pool). It is an ErrBusy too.
var ErrHasDependents = fmt.Errorf("%w: it has dependent snapshots or thin volumes", ErrBusy)

// RemoveLV removes one LV (ErrNotFound when missing, ErrBusy when open).
// It refuses with ErrHasDependents rather than let lvremove --yes also
// delete the LV's COW snapshots or a pool's thin volumes. Everything else
// goes alone: a COW snapshot (its origin stays), a thin LV (its pool and
// its thin snapshots stay), a thin snapshot whose origin is gone (it is a
// plain thin LV by then).
func (c *Client) RemoveLV(ctx context.Context, vg, name string) error {
	if err := validateVGLV(vg, name); err != nil {
		return err
	}
	all, err := c.ListLVs(ctx, vg)
	if err != nil {
		return fmt.Errorf("lvremove %s/%s: %w", vg, name, err)
	}
	i := indexLV(all, name)
	if i < 0 {
		return fmt.Errorf("lvremove %s/%s: logical volume %w", vg, name, ErrNotFound)
	}
	if deps := dependents(all[i], all); len(deps) > 0 {
		return fmt.Errorf("lvremove %s/%s: %w (%s)", vg, name, ErrHasDependents, joinNames(deps))
	}
	return c.lvremove(ctx, all[i])
}

// RemoveLVOf is RemoveLV of an LV the caller has read, which saves its
// listing of the VG: lv's own report tells whether lvremove would take
// other LVs with it, for an origin of COW snapshots says so in its attr.
// A thin pool's thin volumes show only in a listing: a pool goes through
// RemoveLV. The caller answers for the report being current enough (see
// its use); lvremove itself refuses an LV that is open or gone.
func (c *Client) RemoveLVOf(ctx context.Context, lv LV) error {
	if err := validateVGLV(lv.VGName, lv.Name); err != nil {
		return err
	}
	if lv.IsThinPool() {
		return c.RemoveLV(ctx, lv.VGName, lv.Name)
	}
	if lv.HasCOWSnapshots() {
		return fmt.Errorf("lvremove %s/%s: %w (COW snapshots)", lv.VGName, lv.Name, ErrHasDependents)
	}
	return c.lvremove(ctx, lv)
}

// lvremove removes lv; a thin LV's through runThinCommand, since its
// pool's kernel state decides what the lvremove does (see thinrepair.go).
func (c *Client) lvremove(ctx context.Context, lv LV) error {
	pool := ""
	if lv.IsThinVolume() {
		pool = lv.PoolLV // a cached LV's pool_lv is its cache, no thin pool
	}
	if err := c.runThinCommand(ctx, lv.VGName, pool, []string{"lvremove", "--yes", lv.VGName + "/" + lv.Name}); err != nil {
		return fmt.Errorf("lvremove %s/%s: %w", lv.VGName, lv.Name, err)
	}
	return nil
}

func indexLV(lvs []LV, name string) int {
	for i, lv := range lvs {
		if lv.Name == name {
			return i
		}
	}
	return -1
}

// ExtendLV grows an LV to at least size bytes (rounded up to the extent
// size). It does nothing when the LV is already that large: LVs never
// shrink here, so a repeated or late request is harmless.
//
// lvextend keeps the volume type: a thin LV grows its virtual size; a
// striped LV keeps its stripe count and size, rounded up to whole stripe
// rows; a raid1 LV grows every leg and syncs the new part. An origin of COW
// snapshots can only grow while inactive (ErrBusy otherwise).
func (c *Client) ExtendLV(ctx context.Context, vg, name string, size uint64) error {
	if size == 0 {
		return fmt.Errorf("lvextend %s/%s: %w: size must be greater than zero", vg, name, ErrInvalidArgument)
	}
	lv, err := c.GetLV(ctx, vg, name)
	if err != nil {
		return fmt.Errorf("lvextend %s/%s: %w", vg, name, err)
	}
	if lv.Size >= size {
		return nil
	}
	target := RoundUp(size, lv.ExtentSize)
	if target == 0 {
		return fmt.Errorf("lvextend %s/%s: size %d is too large", vg, name, size)
	}
	if _, err := c.run(ctx, "lvextend", "-L", bytesArg(target), vg+"/"+name); err != nil {
		return fmt.Errorf("lvextend %s/%s: %w", vg, name, err)
	}
	return nil
}

// Activate activates an LV, creating its device node. -K overrides the
// activation-skip flag that thin snapshots carry: the caller asked for
// this very LV.
func (c *Client) Activate(ctx context.Context, vg, name string) error {
	return c.activate(ctx, "activate", vg, name, "-ay", "-K")
}

// Deactivate deactivates an LV, removing its device node; ErrBusy while the
// device is open (mounted, or held by a process).
func (c *Client) Deactivate(ctx context.Context, vg, name string) error {
	return c.lvchange(ctx, "deactivate", vg, name, "-an")
}

// AddTags adds tags to an LV; tags it already has are kept as they are.
func (c *Client) AddTags(ctx context.Context, vg, name string, tags ...string) error {
	return c.changeTags(ctx, "--addtag", vg, name, tags)
}

// RemoveTags removes tags from an LV; absent tags are ignored by lvm2.
func (c *Client) RemoveTags(ctx context.Context, vg, name string, tags ...string) error {
	return c.changeTags(ctx, "--deltag", vg, name, tags)
}

// ChangeTags removes and adds tags in one lvchange, so one metadata
// commit: a tag that records a value (name=value) is replaced without a
// moment where the LV carries both values or none. A tag in both lists
// ends on the LV (tagArgs).
func (c *Client) ChangeTags(ctx context.Context, vg, name string, add, remove []string) error {
	if err := validateTags(append(slices.Clone(add), remove...)); err != nil {
		return err
	}
	args := tagArgs(add, remove)
	if len(args) == 0 {
		return validateVGLV(vg, name)
	}
	return c.lvchange(ctx, "tags", vg, name, args...)
}

// RetagAndActivate changes an LV's tags and then its activation in one
// lvchange run (`lvchange --addtag a --deltag d -ay|-an vg/name`): lvm2
// commits the tag changes first and changes the activation after (its
// properties command runs before its activation command, kept so for
// compatibility; lvm2 warns that it is not advised). A crash, or a failed
// activation, in between leaves the tags changed and the activation as it
// was; callers use it only where that order is the safe one. It cannot
// override the activation-skip flag (-K belongs to the activation command
// alone): callers activate such LVs with Activate. A tag in both lists
// ends on the LV (tagArgs).
func (c *Client) RetagAndActivate(ctx context.Context, vg, name string, add, remove []string, active bool) error {
	if err := validateTags(add); err != nil {
		return err
	}
	if err := validateTags(remove); err != nil {
		return err
	}
	args := tagArgs(add, remove)
	if active {
		return c.activate(ctx, "tags, activate", vg, name, append(args, "-ay")...)
	}
	return c.lvchange(ctx, "tags, deactivate", vg, name, append(args, "-an")...)
}

// tagArgs is lvchange's arguments that add tags add and remove tags
// remove. A tag in both lists ends on the LV: it is not removed, since
// lvm2 given --deltag and --addtag of one tag drops it, whatever their
// order (measured; the crash matrix found a retry that re-recorded the
// tag a crash had left in place losing it so).
func tagArgs(add, remove []string) []string {
	args := make([]string, 0, 2*(len(add)+len(remove)))
	for _, t := range add {
		args = append(args, "--addtag", t)
	}
	for _, t := range remove {
		if !slices.Contains(add, t) {
			args = append(args, "--deltag", t)
		}
	}
	return args
}

func (c *Client) changeTags(ctx context.Context, flag, vg, name string, tags []string) error {
	if err := validateTags(tags); err != nil {
		return err
	}
	if len(tags) == 0 {
		return validateVGLV(vg, name)
	}
	args := make([]string, 0, 2*len(tags))
	for _, t := range tags {
		args = append(args, flag, t)
	}
	return c.lvchange(ctx, flag[2:], vg, name, args...)
}

// lvchange runs `lvchange args... vg/name`; what names the operation in
// error messages.
func (c *Client) lvchange(ctx context.Context, what, vg, name string, args ...string) error {
	if err := validateVGLV(vg, name); err != nil {
		return err
	}
	if _, err := c.run(ctx, append(append([]string{"lvchange"}, args...), vg+"/"+name)...); err != nil {
		return fmt.Errorf("lvchange (%s) %s/%s: %w", what, vg, name, err)
	}
	return nil
}
