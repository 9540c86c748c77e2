package lvm

import (
	"context"
	"fmt"
)

// CreateThinSnapshot snapshots a thin LV in its pool: instant, no size of
// its own, sharing blocks with the origin until either is written. The
// snapshot outlives its origin (RemoveLV of the origin leaves it).
//
// -kn leaves out the activation-skip flag lvm2 puts on thin snapshots by
// default, so that plain activation (lvchange -ay, vgchange -ay at boot)
// treats the snapshot like any volume. lvm2 activates the new snapshot when
// its pool is active; callers must not depend on either state.
func (c *Client) CreateThinSnapshot(ctx context.Context, vg, origin, name string, tags ...string) (LV, error) {
	o, err := c.snapshotOrigin(ctx, vg, origin, name, tags)
	if err != nil {
		return LV{}, err
	}
	if !o.IsThinVolume() {
		// lvm2 would ask for a size: without one, -s means a thin snapshot.
		return LV{}, fmt.Errorf("lvcreate %s/%s: %w: origin %s is not a thin LV (attr %s)",
			vg, name, ErrInvalidArgument, origin, o.Attr)
	}
	return c.createSnapshot(ctx, vg, origin, name, tags, "-kn")
}

// CreateCOWSnapshot makes a classic copy-on-write snapshot of a thick LV,
// with cowSize bytes (rounded up to extents) to hold the origin's blocks as
// they were before being overwritten. The snapshot turns invalid
// (LV.SnapshotInvalid) when that space runs out. While an origin has COW
// snapshots it cannot be extended while active, nor removed (ErrBusy,
// ErrHasDependents); removing a snapshot removes only the snapshot.
func (c *Client) CreateCOWSnapshot(ctx context.Context, vg, origin, name string, cowSize uint64, tags ...string) (LV, error) {
	if cowSize == 0 {
		return LV{}, fmt.Errorf("lvcreate %s/%s: %w: snapshot size must be greater than zero", vg, name, ErrInvalidArgument)
	}
	o, err := c.snapshotOrigin(ctx, vg, origin, name, tags)
	if err != nil {
		return LV{}, err
	}
	if o.IsThinVolume() || o.IsThinPool() || o.IsCOWSnapshot() {
		// lvm2 refuses pools and snapshots; a COW snapshot of a thin LV
		// works but defeats thin provisioning: CreateThinSnapshot is meant.
		return LV{}, fmt.Errorf("lvcreate %s/%s: %w: origin %s is not a thick LV (attr %s)",
			vg, name, ErrInvalidArgument, origin, o.Attr)
	}
	size := RoundUp(cowSize, o.ExtentSize)
	if size == 0 {
		return LV{}, fmt.Errorf("lvcreate %s/%s: snapshot size %d is too large", vg, name, cowSize)
	}
	return c.createSnapshot(ctx, vg, origin, name, tags, "-L", bytesArg(size))
}

// snapshotOrigin validates a snapshot request and reports its origin, so
// that a missing or unsuitable origin is told apart from lvm2's messages.
func (c *Client) snapshotOrigin(ctx context.Context, vg, origin, name string, tags []string) (LV, error) {
	if err := validateVGLV(vg, name); err != nil {
		return LV{}, err
	}
	if err := validateVGLV(vg, origin); err != nil {
		return LV{}, err
	}
	if err := validateTags(tags); err != nil {
		return LV{}, err
	}
	o, err := c.GetLV(ctx, vg, origin)
	if err != nil {
		return LV{}, fmt.Errorf("lvcreate %s/%s: origin: %w", vg, name, err)
	}
	return o, nil
}

// createSnapshot runs `lvcreate -s -n name extra... --yes tags vg/origin`.
func (c *Client) createSnapshot(ctx context.Context, vg, origin, name string, tags []string, extra ...string) (LV, error) {
	args := append(append([]string{"lvcreate", "-s", "-n", name}, extra...), "--yes")
	for _, t := range tags {
		args = append(args, "--addtag", t)
	}
	if _, err := c.run(ctx, append(args, vg+"/"+origin)...); err != nil {
		return LV{}, fmt.Errorf("lvcreate %s/%s: %w", vg, name, err)
	}
	return c.GetLV(ctx, vg, name)
}
