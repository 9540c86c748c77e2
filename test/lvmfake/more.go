package lvmfake

import (
	"context"
	"fmt"
	"slices"

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

// SetMetadataArea sets what a VG reports of its metadata area: its size
// and what is left of it (lvm.VG's MetadataSize, MetadataFree).
func (f *LVM) SetMetadataArea(vg string, size, free uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vgs[vg].MetadataSize, f.vgs[vg].MetadataFree = size, free
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
func (f *LVM) ListVGPVs(_ context.Context, _ lvm.Reads, vg string) ([]lvm.PV, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("ListVGPVs"); err != nil {
		return nil, err
	}
	v := f.vgs[vg]
	return []lvm.PV{{Name: "/dev/fake-" + vg, VGName: vg, Size: v.Size, Free: v.Free, Attr: "a--"}}, nil
}

// CheckPlacement needs one PV per raid1 leg, stripe or raid image; the
// fake has one unless SetPVCount said otherwise.
func (f *LVM) CheckPlacement(_ context.Context, o lvm.CreateLVOptions) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.pvCount(o.VG); o.Mirrors+1 > n || o.Stripes > n || lvm.RAIDImages(o.RAID, o.Stripes) > n {
		return fmt.Errorf("placement %s/%s: %w: %d PVs only", o.VG, o.Name, lvm.ErrNoSpace, n)
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
	vet(call, tags)
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
	f.shareThin(vg, origin, name)
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
	vet(call, tags)
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

// SetPVCount gives vg n PVs for the placement checks of raid1 legs and
// stripes (space stays the VG's, shared).
func (f *LVM) SetPVCount(vg string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pvs == nil {
		f.pvs = map[string]int{}
	}
	f.pvs[vg] = n
}

// pvCount is vg's PVs: 1 unless set. f.mu is held.
func (f *LVM) pvCount(vg string) int {
	if n, ok := f.pvs[vg]; ok {
		return n
	}
	return 1
}

// ListAllLVs is ListLVs with the hidden raid images of raid1 LVs, as lvm2
// names them (lvm.Mirrors counts them).
func (f *LVM) ListAllLVs(ctx context.Context, r lvm.Reads, vg string) ([]lvm.LV, error) {
	lvs, err := f.ListLVs(ctx, r, vg)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	lvs = append(lvs, f.cacheRows(vg)...)
	for _, lv := range lvs {
		if n := f.images[vg+"/"+lv.Name]; n > 0 {
			for i := range n {
				lvs = append(lvs, lvm.LV{Name: fmt.Sprintf("%s_rimage_%d", lv.Name, i), VGName: vg, Hidden: true, Size: lv.Size})
			}
		}
	}
	return lvs, nil
}

// ChangeTags removes, then adds, tags in one call.
func (f *LVM) ChangeTags(_ context.Context, vg, name string, add, remove []string) error {
	return f.change("ChangeTags", vg, name, func(lv *lvm.LV) error {
		vet("ChangeTags", add)
		lv.Tags = slices.DeleteFunc(lv.Tags, func(t string) bool { return slices.Contains(remove, t) })
		for _, t := range add {
			if !slices.Contains(lv.Tags, t) {
				lv.Tags = append(lv.Tags, t)
			}
		}
		return nil
	})
}

// RemoveStrayRAIDParts finds none: the fake's conversions are never cut
// short half way.
func (f *LVM) RemoveStrayRAIDParts(context.Context, string, string) ([]string, error) {
	return nil, nil
}

// ConvertMirrors converts an active thick LV to mirrors extra legs at
// once (its legs are in sync right away), taking or returning their space.
func (f *LVM) ConvertMirrors(_ context.Context, vg, name string, mirrors int) error {
	return f.change("ConvertMirrors", vg, name, func(lv *lvm.LV) error {
		if !lv.Active {
			return fmt.Errorf("%s/%s must be active to perform this operation", vg, name)
		}
		key := vg + "/" + name
		have := max(f.images[key]-1, 0)
		if mirrors > have {
			if need := uint64(mirrors-have) * lv.Size; need > f.vgs[vg].Free {
				return lvm.ErrNoSpace
			}
		}
		f.vgs[vg].Free = uint64(int64(f.vgs[vg].Free) - int64(mirrors-have)*int64(lv.Size))
		f.setMirrors(lv, mirrors)
		if mirrors > have && f.ConvertSync > 0 {
			lv.SyncPercent, lv.SyncAction = f.ConvertSync, "recover"
		}
		return nil
	})
}

// setMirrors records lv's legs and layout. f.mu is held.
func (f *LVM) setMirrors(lv *lvm.LV, mirrors int) {
	if f.images == nil {
		f.images = map[string]int{}
	}
	key := lv.VGName + "/" + lv.Name
	if mirrors == 0 {
		delete(f.images, key)
		lv.Layout, lv.SyncPercent, lv.SyncAction = "linear", 0, ""
		return
	}
	f.images[key] = mirrors + 1
	lv.Layout, lv.SyncPercent, lv.SyncAction = "raid,raid1", 100, "idle"
}

// CheckConversion refuses more legs than the VG has PVs (SetPVCount).
func (f *LVM) CheckConversion(_ context.Context, vg lvm.VG, lv lvm.LV, _, want int, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("CheckConversion"); err != nil {
		return err
	}
	if n := f.pvCount(vg.Name); want+1 > n {
		return fmt.Errorf("conversion placement %s/%s: %w: %d PVs only", vg.Name, lv.Name, lvm.ErrNoSpace, n)
	}
	return nil
}

// SetSync sets how far a raid1 LV's legs are in sync, in percent.
func (f *LVM) SetSync(vg, name string, percent float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lv := f.lvs[vg][name]
	lv.SyncPercent, lv.SyncAction = percent, "recover"
	if percent >= 100 {
		lv.SyncAction = "idle"
	}
}

// CutActivation leaves vg/name as an activation cut short leaves a raid1
// LV in real lvm2 (see lvm.LV.Live): reported active, with no device
// number and the unknown state. Activate completes it.
func (f *LVM) CutActivation(vg, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lv := f.lvs[vg][name]
	lv.Active, lv.KernelMajor, lv.KernelMinor = true, -1, -1
	if len(lv.Attr) < 10 {
		lv.Attr = "-wi-------"
	}
	setState(lv, 'X')
}

// RepairInterrupted finds nothing to repair: the fake's commands are never
// cut short mid-way.
func (f *LVM) RepairInterrupted(_ context.Context, _ string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil, f.call("RepairInterrupted")
}

// SetVGTags sets a VG's lvm2 tags (vgchange --addtag).
func (f *LVM) SetVGTags(vg string, tags ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vgs[vg].Tags = slices.Clone(tags)
}

// AddVG adds an empty VG of size bytes.
func (f *LVM) AddVG(name string, size uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vgs[name] = &lvm.VG{Name: name, Size: size, Free: size, ExtentSize: ExtentSize}
	f.lvs[name] = map[string]*lvm.LV{}
}
