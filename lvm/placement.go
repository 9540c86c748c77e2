package lvm

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Footprint is the space, in bytes, that CreateLV(opts) takes from a VG
// with the given extent size: what to compare with VG.Free before asking
// lvm2. Linear: Size rounded up to extents. Striped: Size rounded up to a
// multiple of Stripes extents. raid1: Mirrors+1 legs of Size rounded up to
// extents, plus each leg's metadata LV (one extent unless extents are
// smaller than 512 KiB). Thin: 0, the space comes from the pool.
//
// opts is assumed valid (CreateLV refuses invalid ones). A footprint that
// does not fit in a uint64 is returned as the largest uint64, which fits in
// no VG.
func Footprint(opts CreateLVOptions, extentSize uint64) uint64 {
	if opts.Size == 0 {
		return 0
	}
	switch opts.volumeType() {
	case typeThin:
		return 0
	case typeRAID1:
		return mulSat(legFootprint(opts, extentSize), uint64(opts.Mirrors)+1)
	}
	size := opts.roundedSize(extentSize)
	if size == 0 {
		return maxUint64
	}
	return size
}

// legFootprint is what one PV must hold of a striped or raid1 LV: a
// stripe's share, or a raid1 leg with its metadata LV.
func legFootprint(opts CreateLVOptions, extent uint64) uint64 {
	size := opts.roundedSize(extent)
	switch {
	case size == 0:
		return maxUint64
	case opts.volumeType() == typeStriped:
		return size / uint64(opts.Stripes)
	case opts.volumeType() == typeRAID1:
		return addSat(size, mulSat(raidMetaExtents(size, extent), extent))
	}
	return size
}

// raidMetaExtents is the size, in extents, of the metadata LV lvm2 gives
// each raid leg of size bytes (lib/metadata/raid_manip.c,
// _raid_rmeta_extents): 8 KiB of superblocks plus a bitmap of one bit per
// region. Regions are 2 MiB (lvm2's default raid_region_size), doubled
// until there are at most 2^21 of them, as lvcreate does; so the metadata
// never exceeds 264 KiB.
func raidMetaExtents(size, extent uint64) uint64 {
	if extent == 0 {
		return 0
	}
	region := uint64(2 << 20)
	for size/region > 1<<21 {
		region *= 2
	}
	bytes := 8192 + (size/region+7)/8
	return (bytes + extent - 1) / extent
}

const maxUint64 = ^uint64(0)

func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return maxUint64
	}
	return lo
}

func addSat(a, b uint64) uint64 {
	sum, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return maxUint64
	}
	return sum
}

// CheckPlacement tells whether lvm2 can place a striped or raid1 LV: it
// needs as many distinct PVs of the VG as stripes or legs, each with a
// stripe's share or a whole leg free. It returns nil, or an error wrapping
// ErrNoSpace that says what is missing. Missing and non-allocatable PVs do
// not count. Linear and thin LVs need no particular PVs: it returns nil for
// them without running anything (compare Footprint with VG.Free).
//
// The rule is the simple, safe one: lvm2 could sometimes split a leg or a
// stripe over several PVs where this refuses.
func (c *Client) CheckPlacement(ctx context.Context, opts CreateLVOptions) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	kind := opts.volumeType()
	if kind != typeStriped && kind != typeRAID1 {
		return nil
	}
	// The extent size the caller read with the VG, as for CreateLV: it
	// only sizes the legs, and saves a vgs.
	extent := opts.ExtentSize
	if extent == 0 {
		vg, err := c.GetVG(ctx, opts.VG)
		if err != nil {
			return fmt.Errorf("placement %s/%s: %w", opts.VG, opts.Name, err)
		}
		extent = vg.ExtentSize
	}
	pvs, err := c.ListVGPVs(ctx, opts.VG)
	if err != nil {
		return fmt.Errorf("placement %s/%s: %w", opts.VG, opts.Name, err)
	}
	need := legFootprint(opts, extent)
	fit := 0
	for _, pv := range pvs {
		if pv.Allocatable() && pv.Free >= need {
			fit++
		}
	}
	legs, what := opts.Stripes, "striped with %d stripes"
	if kind == typeRAID1 {
		legs, what = opts.Mirrors+1, "raid1 with %d legs"
	}
	if fit >= legs {
		return nil
	}
	return fmt.Errorf("placement %s/%s: %w: "+what+" needs %d PVs with %s free each; %s has %d",
		opts.VG, opts.Name, ErrNoSpace, legs, legs, FormatSize(need), opts.VG, fit)
}

// FormatSize renders bytes for people, in binary units: "1 GiB",
// "1.5 GiB", "516 MiB"; 4096 is "4 KiB". Inexact values are rounded up to
// two decimals, so that a stated need is never less than the real one.
func FormatSize(b uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i, div := 0, uint64(1)
	for i < len(units)-1 && b/div >= 1024 {
		i, div = i+1, div*1024
	}
	if b%div == 0 {
		return strconv.FormatUint(b/div, 10) + " " + units[i]
	}
	s := strconv.FormatFloat(math.Ceil(float64(b)/float64(div)*100)/100, 'f', 2, 64)
	return strings.TrimRight(strings.TrimRight(s, "0"), ".") + " " + units[i]
}
