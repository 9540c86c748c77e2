package lvmfake

import (
	"context"
	"fmt"

	"carve.dev/carve/lvm"
)

// PutThinPool adds a thin pool of size bytes (zeroing new blocks, active,
// usedPercent of its data in use).
func (f *LVM) PutThinPool(vg, name string, size uint64, usedPercent float64) {
	f.Put(lvm.LV{Name: name, VGName: vg, Size: size, Attr: "twi-a-tz--", Layout: "thin,pool",
		Active: true, DataPercent: usedPercent})
}

// SetPoolUsage sets a thin pool's used data and metadata, in percent, and
// the size of its metadata LV.
func (f *LVM) SetPoolUsage(vg, name string, data, metadata float64, metadataSize uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lv := f.lvs[vg][name]
	lv.DataPercent, lv.MetadataPercent, lv.MetadataSize = data, metadata, metadataSize
}

// SetMissingPVs makes n of a VG's PVs missing (0: all back), as lvm2
// reports a VG whose disk vanished: in its vgs report, and with each of
// its LVs in lvs (vg_missing_pv_count).
func (f *LVM) SetMissingPVs(vg string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vgs[vg].MissingPVCount, f.vgs[vg].Partial = n, n > 0
}

func (f *LVM) ExtendLV(_ context.Context, vg, name string, size uint64) error {
	return f.change("ExtendLV", vg, name, func(lv *lvm.LV) error {
		target := lvm.RoundUp(size, ExtentSize)
		if target <= lv.Size {
			return nil
		}
		if lv.PoolLV == "" {
			if target-lv.Size > f.vgs[vg].Free {
				return lvm.ErrNoSpace
			}
			f.vgs[vg].Free -= target - lv.Size
		}
		lv.Size = target
		return nil
	})
}

// ListVGPVs reports one PV per VG holding all of its space.
func (f *LVM) ListVGPVs(_ context.Context, vg string) ([]lvm.PV, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("ListVGPVs"); err != nil {
		return nil, err
	}
	v := f.vgs[vg]
	return []lvm.PV{{Name: "/dev/fake-" + vg, VGName: vg, Size: v.Size, Free: v.Free, Attr: "a--"}}, nil
}

// CheckPlacement needs one PV per raid1 leg or stripe; the fake has one.
func (f *LVM) CheckPlacement(_ context.Context, o lvm.CreateLVOptions) error {
	if o.Mirrors > 0 || o.Stripes > 1 {
		return fmt.Errorf("placement %s/%s: %w: one PV only", o.VG, o.Name, lvm.ErrNoSpace)
	}
	return nil
}

// CreateSnapshotOf is CreateThinSnapshot (o.COWSize 0) or
// CreateCOWSnapshot of origin; a thin snapshot is active unless o.Inactive,
// as lvm2 makes it with an active pool.
func (f *LVM) CreateSnapshotOf(ctx context.Context, origin lvm.LV, name string, o lvm.SnapshotOptions) (lvm.LV, error) {
	if o.COWSize > 0 {
		return f.createCOW("CreateSnapshotOf", origin.VGName, origin.Name, name, o.COWSize, o.Tags...)
	}
	lv, err := f.createThin("CreateSnapshotOf", origin.VGName, origin.Name, name, o.Tags...)
	if err != nil || o.Inactive {
		return lv, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lvs[origin.VGName][name]
	f.activate(l)
	return *l, nil
}

// CreateThinSnapshot makes an inactive thin snapshot of a thin LV.
func (f *LVM) CreateThinSnapshot(_ context.Context, vg, origin, name string, tags ...string) (lvm.LV, error) {
	return f.createThin("CreateThinSnapshot", vg, origin, name, tags...)
}

func (f *LVM) createThin(call, vg, origin, name string, tags ...string) (lvm.LV, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(call); err != nil {
		return lvm.LV{}, err
	}
	o, ok := f.lvs[vg][origin]
	if !ok || o.PoolLV == "" {
		return lvm.LV{}, fmt.Errorf("thin snapshot of %s/%s: %w", vg, origin, lvm.ErrNotFound)
	}
	if _, ok := f.lvs[vg][name]; ok {
		return lvm.LV{}, fmt.Errorf("lvcreate %s/%s: %w", vg, name, lvm.ErrAlreadyExists)
	}
	lv := &lvm.LV{Name: name, VGName: vg, UUID: f.uuid(), Size: o.Size, PoolLV: o.PoolLV, Origin: origin, Tags: tags,
		Layout: "thin,sparse", Attr: "Vwi---tz-k"}
	f.lvs[vg][name] = lv
	return *lv, nil
}

// CreateCOWSnapshot makes an active COW snapshot and marks its origin.
func (f *LVM) CreateCOWSnapshot(_ context.Context, vg, origin, name string, cowSize uint64, tags ...string) (lvm.LV, error) {
	return f.createCOW("CreateCOWSnapshot", vg, origin, name, cowSize, tags...)
}

func (f *LVM) createCOW(call, vg, origin, name string, cowSize uint64, tags ...string) (lvm.LV, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call(call); err != nil {
		return lvm.LV{}, err
	}
	o, ok := f.lvs[vg][origin]
	if !ok {
		return lvm.LV{}, fmt.Errorf("snapshot of %s/%s: %w", vg, origin, lvm.ErrNotFound)
	}
	if _, ok := f.lvs[vg][name]; ok {
		return lvm.LV{}, fmt.Errorf("lvcreate %s/%s: %w", vg, name, lvm.ErrAlreadyExists)
	}
	size := lvm.RoundUp(cowSize, ExtentSize)
	if size > f.vgs[vg].Free {
		return lvm.LV{}, fmt.Errorf("lvcreate %s/%s: %w", vg, name, lvm.ErrNoSpace)
	}
	f.vgs[vg].Free -= size
	o.Attr = "owi-a-----"
	lv := &lvm.LV{Name: name, VGName: vg, UUID: f.uuid(), Size: size, Origin: origin, Tags: tags, Active: true, Attr: "swi-a-s---"}
	f.lvs[vg][name] = lv
	return *lv, nil
}
