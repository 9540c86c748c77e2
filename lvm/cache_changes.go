package lvm

import "context"

// The changes a Cache passes to its Client, each inside changing (see the
// Cache's comment for why that keeps the cache exact). A new change method
// of Client that Carve uses must be added here the same way: the Manager
// only sees the Cache.

// changed runs a change that returns an LV.
func (x *Cache) changed(vg string, change func() (LV, error)) (LV, error) {
	var lv LV
	err := x.changing(vg, func() (err error) {
		lv, err = change()
		return err
	})
	return lv, err
}

// CreateLV is Client.CreateLV.
func (x *Cache) CreateLV(ctx context.Context, o CreateLVOptions) (LV, error) {
	return x.changed(o.VG, func() (LV, error) { return x.c.CreateLV(ctx, o) })
}

// CreateThinPool is Client.CreateThinPool.
func (x *Cache) CreateThinPool(ctx context.Context, vg, name string, size uint64, tags ...string) (LV, error) {
	return x.changed(vg, func() (LV, error) { return x.c.CreateThinPool(ctx, vg, name, size, tags...) })
}

// CreateThinSnapshot is Client.CreateThinSnapshot.
func (x *Cache) CreateThinSnapshot(ctx context.Context, vg, origin, name string, tags ...string) (LV, error) {
	return x.changed(vg, func() (LV, error) { return x.c.CreateThinSnapshot(ctx, vg, origin, name, tags...) })
}

// CreateCOWSnapshot is Client.CreateCOWSnapshot.
func (x *Cache) CreateCOWSnapshot(ctx context.Context, vg, origin, name string, cowSize uint64, tags ...string) (LV, error) {
	return x.changed(vg, func() (LV, error) { return x.c.CreateCOWSnapshot(ctx, vg, origin, name, cowSize, tags...) })
}

// CreateSnapshotOf is Client.CreateSnapshotOf.
func (x *Cache) CreateSnapshotOf(ctx context.Context, origin LV, name string, o SnapshotOptions) (LV, error) {
	return x.changed(origin.VGName, func() (LV, error) { return x.c.CreateSnapshotOf(ctx, origin, name, o) })
}

// RemoveLVOf is Client.RemoveLVOf.
func (x *Cache) RemoveLVOf(ctx context.Context, lv LV) error {
	return x.changing(lv.VGName, func() error { return x.c.RemoveLVOf(ctx, lv) })
}

// RetagAndActivate is Client.RetagAndActivate.
func (x *Cache) RetagAndActivate(ctx context.Context, vg, name string, add, remove []string, active bool) error {
	return x.changing(vg, func() error { return x.c.RetagAndActivate(ctx, vg, name, add, remove, active) })
}

// RemoveLV is Client.RemoveLV.
func (x *Cache) RemoveLV(ctx context.Context, vg, name string) error {
	return x.changing(vg, func() error { return x.c.RemoveLV(ctx, vg, name) })
}

// ExtendLV is Client.ExtendLV.
func (x *Cache) ExtendLV(ctx context.Context, vg, name string, size uint64) error {
	return x.changing(vg, func() error { return x.c.ExtendLV(ctx, vg, name, size) })
}

// Activate is Client.Activate.
func (x *Cache) Activate(ctx context.Context, vg, name string) error {
	return x.changing(vg, func() error { return x.c.Activate(ctx, vg, name) })
}

// Deactivate is Client.Deactivate.
func (x *Cache) Deactivate(ctx context.Context, vg, name string) error {
	return x.changing(vg, func() error { return x.c.Deactivate(ctx, vg, name) })
}

// AddTags is Client.AddTags.
func (x *Cache) AddTags(ctx context.Context, vg, name string, tags ...string) error {
	return x.changing(vg, func() error { return x.c.AddTags(ctx, vg, name, tags...) })
}

// RemoveTags is Client.RemoveTags.
func (x *Cache) RemoveTags(ctx context.Context, vg, name string, tags ...string) error {
	return x.changing(vg, func() error { return x.c.RemoveTags(ctx, vg, name, tags...) })
}

// CheckPlacement is Client.CheckPlacement: it changes nothing (lvcreate
// --test), so it runs as it is.
func (x *Cache) CheckPlacement(ctx context.Context, opts CreateLVOptions) error {
	return x.c.CheckPlacement(ctx, opts)
}

// RepairInterrupted is Client.RepairInterrupted.
func (x *Cache) RepairInterrupted(ctx context.Context, vg string) ([]string, error) {
	var did []string
	err := x.changing(vg, func() (err error) { did, err = x.c.RepairInterrupted(ctx, vg); return err })
	return did, err
}

// MakeNodes is Client.MakeNodes: it changes /dev, not what lvm2 reports.
func (x *Cache) MakeNodes(ctx context.Context, vg string) error { return x.c.MakeNodes(ctx, vg) }

// ConvertMirrors is Client.ConvertMirrors.
func (x *Cache) ConvertMirrors(ctx context.Context, vg, name string, mirrors int) error {
	return x.changing(vg, func() error { return x.c.ConvertMirrors(ctx, vg, name, mirrors) })
}

// RemoveStrayRAIDParts is Client.RemoveStrayRAIDParts.
func (x *Cache) RemoveStrayRAIDParts(ctx context.Context, vg, name string) (stray []string, err error) {
	err = x.changing(vg, func() error { stray, err = x.c.RemoveStrayRAIDParts(ctx, vg, name); return err })
	return stray, err
}

// CreateCacheVol is Client.CreateCacheVol.
func (x *Cache) CreateCacheVol(ctx context.Context, vg, name string, size, extent uint64, refs, tags []string) error {
	return x.changing(vg, func() error { return x.c.CreateCacheVol(ctx, vg, name, size, extent, refs, tags) })
}

// AttachWriteCache is Client.AttachWriteCache.
func (x *Cache) AttachWriteCache(ctx context.Context, vg, name, cachevol string) error {
	return x.changing(vg, func() error { return x.c.AttachWriteCache(ctx, vg, name, cachevol) })
}

// SplitCache is Client.SplitCache.
func (x *Cache) SplitCache(ctx context.Context, vg, name string) error {
	return x.changing(vg, func() error { return x.c.SplitCache(ctx, vg, name) })
}

// ChangeTags is Client.ChangeTags.
func (x *Cache) ChangeTags(ctx context.Context, vg, name string, add, remove []string) error {
	return x.changing(vg, func() error { return x.c.ChangeTags(ctx, vg, name, add, remove) })
}

// CheckConversion is Client.CheckConversion: it only reads, and always
// afresh (it decides a change).
func (x *Cache) CheckConversion(ctx context.Context, vg VG, lv LV, have, want int, integrity bool) error {
	return x.c.CheckConversion(ctx, vg, lv, have, want, integrity)
}

// ThinAllocated is Client.ThinAllocated. It counts as a change: it
// activates the LV's pool when the pool is not active, which no print
// shows (the cache's comment), and its reserve and release of the pool's
// metadata snapshot move the pool's metadata usage.
func (x *Cache) ThinAllocated(ctx context.Context, vg, lv string, from uint64, each func(Range) error) error {
	return x.changing(vg, func() error { return x.c.ThinAllocated(ctx, vg, lv, from, each) })
}

// ThinDelta is Client.ThinDelta, a change as ThinAllocated is.
func (x *Cache) ThinDelta(ctx context.Context, vg, base, target string, from uint64, each func(Range) error) error {
	return x.changing(vg, func() error { return x.c.ThinDelta(ctx, vg, base, target, from, each) })
}

// ReleaseMetadataSnaps is Client.ReleaseMetadataSnaps: it changes no
// report (a held metadata snapshot is the kernel's, in no lvs field).
func (x *Cache) ReleaseMetadataSnaps(ctx context.Context, vg string) ([]string, error) {
	return x.c.ReleaseMetadataSnaps(ctx, vg)
}

// CreateVGOnBlank is Client.CreateVGOnBlank: a VG that was none, or was
// unreadable, is read afresh.
func (x *Cache) CreateVGOnBlank(ctx context.Context, vg string, devices ...string) error {
	return x.changing(vg, func() error { return x.c.CreateVGOnBlank(ctx, vg, devices...) })
}

// ExtendVGOnBlank is Client.ExtendVGOnBlank.
func (x *Cache) ExtendVGOnBlank(ctx context.Context, vg string, devices ...string) error {
	return x.changing(vg, func() error { return x.c.ExtendVGOnBlank(ctx, vg, devices...) })
}

// ListPVs is Client.ListPVs, never cached: it reads every PV lvm2 sees,
// in VGs or none, which no VG's report covers.
func (x *Cache) ListPVs(ctx context.Context) ([]PV, error) { return x.c.ListPVs(ctx) }
