package lvmfake

import (
	"context"
	"fmt"
	"slices"

	"carve.dev/carve/lvm"
)

// CreateCacheVol makes an inactive linear LV, taking its space; the PVs
// named are not modelled (the fake has one pool of space per VG).
func (f *LVM) CreateCacheVol(_ context.Context, vg, name string, size, extent uint64, refs, tags []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("CreateCacheVol"); err != nil {
		return err
	}
	vet("CreateCacheVol", tags)
	if err := lvm.ValidatePVRefs(refs); err != nil {
		return err
	}
	if _, ok := f.lvs[vg][name]; ok {
		return fmt.Errorf("lvcreate %s/%s: %w", vg, name, lvm.ErrAlreadyExists)
	}
	size = lvm.RoundUp(size, extent)
	if size > f.vgs[vg].Free {
		return fmt.Errorf("lvcreate %s/%s: %w", vg, name, lvm.ErrNoSpace)
	}
	f.vgs[vg].Free -= size
	f.lvs[vg][name] = &lvm.LV{Name: name, VGName: vg, UUID: f.uuid(), Size: size, Tags: slices.Clone(tags),
		Path: "/dev/" + vg + "/" + name, Layout: "linear", ExtentSize: f.vgs[vg].ExtentSize, KernelMajor: -1, KernelMinor: -1}
	return nil
}

// AttachWriteCache hides cachevol behind LV name, as lvm2 does: refused
// for a thin LV, a raid1 LV and an active cachevol.
func (f *LVM) AttachWriteCache(_ context.Context, vg, name, cachevol string) error {
	return f.change("AttachWriteCache", vg, name, func(lv *lvm.LV) error {
		cv, ok := f.lvs[vg][cachevol]
		switch {
		case !ok:
			return fmt.Errorf("cachevol %s: %w", cachevol, lvm.ErrNotFound)
		case cv.Active:
			return fmt.Errorf("LV %s/%s must be inactive to attach", vg, cachevol)
		case lv.PoolLV != "" || f.images[vg+"/"+name] > 0 || lv.CacheVol != "":
			return fmt.Errorf("command not permitted on LV %s/%s", vg, name)
		}
		delete(f.lvs[vg], cachevol)
		if f.cachevols == nil {
			f.cachevols = map[string]*lvm.LV{}
		}
		f.cachevols[vg+"/"+name] = cv
		lv.CacheVol, lv.Layout = cachevol, "writecache"
		return nil
	})
}

// SplitCache gives the cachevol back as a visible, inactive LV.
func (f *LVM) SplitCache(_ context.Context, vg, name string) error {
	return f.change("SplitCache", vg, name, func(lv *lvm.LV) error {
		cv, ok := f.cachevols[vg+"/"+name]
		if !ok {
			return fmt.Errorf("LV %s/%s has no cache", vg, name)
		}
		delete(f.cachevols, vg+"/"+name)
		deactivate(cv)
		f.lvs[vg][cv.Name] = cv
		lv.CacheVol, lv.Layout = "", "linear"
		return nil
	})
}

// cacheRows are the hidden rows lvm2 reports for attached cachevols.
// f.mu is held.
func (f *LVM) cacheRows(vg string) []lvm.LV {
	var out []lvm.LV
	for _, lv := range f.lvs[vg] {
		if cv, ok := f.cachevols[vg+"/"+lv.Name]; ok {
			row := *cv
			row.Name, row.Hidden, row.Layout = cv.Name+"_cvol", true, "writecache,cachevol"
			row.Active = lv.Active
			out = append(out, row)
		}
	}
	return out
}

// dropCache frees the cachevol of an LV being removed: lvremove takes it
// along, unflushed. f.mu is held.
func (f *LVM) dropCache(vg, name string) {
	if cv, ok := f.cachevols[vg+"/"+name]; ok {
		f.vgs[vg].Free += cv.Size
		delete(f.cachevols, vg+"/"+name)
	}
}
