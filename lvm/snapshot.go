package lvm

import (
	"context"
	"fmt"
	"slices"
	"strconv"
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
	return c.createSnapshot(ctx, vg, origin, name, o.PoolLV, tags, "-kn")
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
	return c.createSnapshot(ctx, vg, origin, name, "", tags, "-L", bytesArg(size))
}

// SnapshotOptions describe a snapshot that CreateSnapshotOf makes of an
// origin the caller has just read.
type SnapshotOptions struct {
	Tags []string
	// COWSize > 0 makes a COW snapshot of a thick origin with that many
	// bytes of copy-on-write space (as CreateCOWSnapshot); 0 a thin
	// snapshot of a thin origin (as CreateThinSnapshot).
	COWSize uint64
	// ChunkSize, for a COW snapshot, is its copy-on-write unit (lvcreate
	// --chunksize: a power of two from 4 KiB to 512 KiB); 0 is lvm2's
	// default (4 KiB). dm-snapshot splits every read of the snapshot into
	// chunk-sized pieces: larger chunks read it faster, and cost more COW
	// space and copying per small write to the origin.
	ChunkSize uint64
	// Inactive creates a thin snapshot inactive (lvcreate -an), which lvm2
	// allows for thin LVs only: a COW snapshot is active with its origin.
	Inactive bool
	// SkipReadBack returns the snapshot as the options and the origin
	// describe it instead of reading it back (see CreateLVOptions).
	SkipReadBack bool
	// SuspendedLayers: the snapshot is made while Carve holds the I/O of
	// devices above LVs (a snapshot's window, driver/mapper). Its lvm2
	// commands then skip suspended devices in their scan, and run as
	// processes (withSuspendedLayers says why).
	SuspendedLayers bool
}

// CreateSnapshotOf is CreateThinSnapshot or CreateCOWSnapshot of an origin
// the caller has read itself, which saves their lvs of the origin: origin
// is only judged (its kind, its extent size), and lvcreate refuses an
// origin that is gone. With o.SkipReadBack it runs lvcreate alone.
func (c *Client) CreateSnapshotOf(ctx context.Context, origin LV, name string, o SnapshotOptions) (LV, error) {
	vg := origin.VGName
	if err := validateVGLV(vg, name); err != nil {
		return LV{}, err
	}
	if o.SuspendedLayers {
		ctx = withSuspendedLayers(ctx)
	}
	if err := validateVGLV(vg, origin.Name); err != nil {
		return LV{}, err
	}
	if err := validateTags(o.Tags); err != nil {
		return LV{}, err
	}
	var extra []string
	snap := LV{Name: name, VGName: vg, Path: "/dev/" + vg + "/" + name, Tags: slices.Clone(o.Tags), Origin: origin.Name,
		ExtentSize: origin.ExtentSize, KernelMajor: -1, KernelMinor: -1}
	switch {
	case o.COWSize == 0 && !origin.IsThinVolume():
		return LV{}, fmt.Errorf("lvcreate %s/%s: %w: origin %s is not a thin LV (attr %s)", vg, name, ErrInvalidArgument, origin.Name, origin.Attr)
	case o.COWSize == 0:
		extra = []string{"-kn"}
		if o.Inactive {
			extra = append(extra, "-an")
		}
		snap.Size, snap.PoolLV, snap.Active = origin.Size, origin.PoolLV, !o.Inactive && origin.Active
	case o.Inactive || origin.IsThinVolume() || origin.IsThinPool() || origin.IsCOWSnapshot():
		return LV{}, fmt.Errorf("lvcreate %s/%s: %w: origin %s is not a thick LV (attr %s), or an inactive COW snapshot was asked",
			vg, name, ErrInvalidArgument, origin.Name, origin.Attr)
	default:
		size := RoundUp(o.COWSize, origin.ExtentSize)
		if size == 0 {
			return LV{}, fmt.Errorf("lvcreate %s/%s: snapshot size %d is too large", vg, name, o.COWSize)
		}
		extra = []string{"-L", bytesArg(size)}
		if o.ChunkSize != 0 {
			if o.ChunkSize < 4<<10 || o.ChunkSize > 512<<10 || o.ChunkSize&(o.ChunkSize-1) != 0 {
				return LV{}, fmt.Errorf("lvcreate %s/%s: %w: chunk size %d is not a power of two from 4 KiB to 512 KiB", vg, name, ErrInvalidArgument, o.ChunkSize)
			}
			extra = append(extra, "--chunksize", strconv.FormatUint(o.ChunkSize>>10, 10)+"k")
		}
		snap.Size, snap.Active = size, true
	}
	if !o.SkipReadBack {
		return c.createSnapshot(ctx, vg, origin.Name, name, snap.PoolLV, o.Tags, extra...)
	}
	if err := c.runSnapshot(ctx, vg, origin.Name, name, snap.PoolLV, o.Tags, extra...); err != nil {
		return LV{}, err
	}
	return snap, nil
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

// createSnapshot runs `lvcreate -s -n name extra... --yes tags vg/origin`
// and reads the snapshot back. pool is a thin snapshot's pool, "" for a
// COW snapshot.
func (c *Client) createSnapshot(ctx context.Context, vg, origin, name, pool string, tags []string, extra ...string) (LV, error) {
	if err := c.runSnapshot(ctx, vg, origin, name, pool, tags, extra...); err != nil {
		return LV{}, err
	}
	return c.GetLV(ctx, vg, name)
}

// runSnapshot runs the lvcreate; a thin one through runThinCommand, which
// repairs what a cut command left in the pool.
func (c *Client) runSnapshot(ctx context.Context, vg, origin, name, pool string, tags []string, extra ...string) error {
	args := append(append([]string{"lvcreate", "-s", "-n", name}, extra...), "--yes")
	for _, t := range tags {
		args = append(args, "--addtag", t)
	}
	if err := c.runThinCommand(ctx, vg, pool, append(args, vg+"/"+origin)); err != nil {
		return fmt.Errorf("lvcreate %s/%s: %w", vg, name, err)
	}
	return nil
}
