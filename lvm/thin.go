package lvm

import (
	"context"
	"fmt"
	"math"
)

// CreateThinPool creates a thin pool of size bytes (rounded up to extents)
// for thin LVs (CreateLVOptions.ThinPool) and returns its report. lvm2 adds
// a metadata LV and, for the VG's first pool, a spare of the same size, so
// the pool takes somewhat more than size from the VG.
//
// --zero y makes the pool zero each block it provisions before a thin LV
// first writes part of it: without it the rest of the block would show
// whatever an earlier, deleted thin LV left there.
func (c *Client) CreateThinPool(ctx context.Context, vg, name string, size uint64, tags ...string) (LV, error) {
	if err := validateVGLV(vg, name); err != nil {
		return LV{}, err
	}
	if err := validateTags(tags); err != nil {
		return LV{}, err
	}
	if size == 0 {
		return LV{}, fmt.Errorf("lvcreate %s/%s: %w: size must be greater than zero", vg, name, ErrInvalidArgument)
	}
	v, err := c.GetVG(ctx, vg)
	if err != nil {
		return LV{}, fmt.Errorf("lvcreate %s/%s: %w", vg, name, err)
	}
	rounded := RoundUp(size, v.ExtentSize)
	if rounded == 0 {
		return LV{}, fmt.Errorf("lvcreate %s/%s: size %d is too large", vg, name, size)
	}
	args := []string{"lvcreate", "--type", "thin-pool", "-n", name, "-L", bytesArg(rounded), "--zero", "y", "--yes"}
	for _, t := range tags {
		args = append(args, "--addtag", t)
	}
	if _, err := c.run(ctx, append(args, vg)...); err != nil {
		return LV{}, fmt.Errorf("lvcreate %s/%s: %w", vg, name, err)
	}
	return c.GetLV(ctx, vg, name)
}

// ThinPoolFree is how many bytes of a thin pool's data space no thin LV
// uses yet: Size*(1-DataPercent/100), with the used part rounded up, since
// lvm2 gives the percent to two decimals only. It is 0 for an LV that is
// not a thin pool, and for an inactive pool, whose usage lvm2 cannot read
// (it reports no data_percent then): unknown must not pass for empty.
func (lv LV) ThinPoolFree() uint64 {
	if !lv.IsThinPool() || !lv.Active || lv.DataPercent >= 100 {
		return 0
	}
	used := uint64(math.Ceil(float64(lv.Size) * lv.DataPercent / 100))
	if used >= lv.Size {
		return 0
	}
	return lv.Size - used
}
