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
	case typeRAID1, typeRAID:
		return mulSat(LegFootprint(opts, extentSize), uint64(legs(opts)))
	}
	size := opts.roundedSize(extentSize)
	if size == 0 {
		return maxUint64
	}
	return size
}

// legs is how many PVs a striped or raid LV needs, each holding one
// LegFootprint: its stripes, raid1 legs or raid images; 1 otherwise.
func legs(opts CreateLVOptions) int {
	switch opts.volumeType() {
	case typeStriped:
		return opts.Stripes
	case typeRAID1:
		return opts.Mirrors + 1
	case typeRAID:
		return RAIDImages(opts.RAID, opts.Stripes)
	}
	return 1
}

// LegFootprint is what one PV must hold of a striped or raid LV (opts
// assumed valid; the largest uint64 when it overflows): a
// stripe's share; a raid1 leg with its metadata LV, and its integrity
// metadata LV, which lvm2 puts on the leg's PV; a raid5/6/10 image (a
// stripe's share) with its metadata LV.
func LegFootprint(opts CreateLVOptions, extent uint64) uint64 {
	size := opts.roundedSize(extent)
	switch {
	case size == 0:
		return maxUint64
	case opts.volumeType() == typeStriped:
		return size / uint64(opts.Stripes)
	case opts.volumeType() == typeRAID1:
		leg := addSat(size, mulSat(raidMetaExtents(size, extent), extent))
		if opts.Integrity {
			leg = addSat(leg, RoundUp(integrityMetaBytes(size), extent))
		}
		return leg
	case opts.volumeType() == typeRAID:
		image := size / uint64(opts.Stripes)
		return addSat(image, mulSat(raidMetaExtents(image, extent), extent))
	}
	return size
}

// integrityMetaBytes is the dm-integrity metadata LV lvm2 2.03.16 gives a
// raid1 leg of size bytes (lib/metadata/integrity_manip.c,
// _lv_size_bytes_to_integrity_meta_bytes): 4 MiB per started 500 MiB of
// data, as lvm2's authors measured it, plus room for dm-integrity's
// journal: 4 MiB for a leg up to 512 MiB, 8 MiB up to 1 GiB, 32 MiB up
// to 4 GiB, 64 MiB beyond. Measured in the test VM: 8 MiB for a 16 MiB
// and a 100 MiB leg. Rounded up to extents by the caller, as lvm2
// allocates it.
func integrityMetaBytes(size uint64) uint64 {
	const mb = 1 << 20
	journal := uint64(64 * mb)
	switch {
	case size <= 512*mb:
		journal = 4 * mb
	case size <= 1024*mb:
		journal = 8 * mb
	case size <= 4096*mb:
		journal = 32 * mb
	}
	return addSat(mulSat(size/(500*mb)+1, 4*mb), journal)
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

// CheckPlacement tells whether lvm2 can place a striped or raid LV: it
// needs as many distinct PVs of the VG as stripes, raid1 legs or raid
// images, each with a stripe's share, a whole leg or a whole image free. It returns nil, or an error wrapping
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
	if kind != typeStriped && kind != typeRAID1 && kind != typeRAID {
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
	need := LegFootprint(opts, extent)
	fit := 0
	for _, pv := range pvs {
		if pv.Allocatable() && pv.Free >= need {
			fit++
		}
	}
	n, what := legs(opts), fmt.Sprintf("striped with %d stripes", opts.Stripes)
	switch kind {
	case typeRAID1:
		what = fmt.Sprintf("raid1 with %d legs", n)
	case typeRAID:
		what = fmt.Sprintf("%s with %d data stripes", opts.RAID, opts.Stripes)
	}
	if fit >= n {
		return nil
	}
	return fmt.Errorf("placement %s/%s: %w: %s needs %d PVs with %s free each; %s has %d",
		opts.VG, opts.Name, ErrNoSpace, what, n, FormatSize(need), opts.VG, fit)
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
