package lvm

import (
	"context"
	"time"
)

// derived is a value built from one LV report of a VG: it is valid while
// that very report (its generation and read time) is the VG's.
type derived struct {
	v   any
	gen uint64
	at  time.Time
}

// DerivedFromLVs returns what build makes of vg's LVs (hidden ones
// included), reading them as ListAllLVs does for r, and keeps it with
// the report it came from: while that report answers r's reads, the
// next call returns the same value without a new build. A listing of a
// thousand volumes is built once per report instead of once per page:
// building is what a ListVolumes page cost at 1000 volumes, not lvm2 (no
// run; docs/performance.md).
//
// The value is shared: build must return something its callers only
// read, or copy. key names the kind of value (one VG may keep several).
func (x *Cache) DerivedFromLVs(ctx context.Context, r Reads, vg, key string, build func([]LV) (any, error)) (any, error) {
	if err := ValidateVGName(vg); err != nil {
		return nil, err
	}
	if v, ok := x.derivedOf(r, vg, key); ok {
		return v, nil
	}
	x.mu.Lock()
	gen := x.gens[vg]
	x.mu.Unlock()
	lvs, err := x.allLVs(ctx, r, vg)
	if err != nil {
		return nil, err
	}
	v, err := build(lvs)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	// Kept only with the report it was built from: the one cached now,
	// at the generation read before, which no change has moved since.
	if e, ok := x.lvs[vg]; ok && e.gen == gen && x.gens[vg] == gen {
		if x.derived == nil {
			x.derived = map[string]derived{}
		}
		x.derived[vg+"\x00"+key] = derived{v: v, gen: e.gen, at: e.at}
	}
	return v, nil
}

// derivedOf returns the value kept for vg and key when the report it was
// built from is current and may answer reads r.
func (x *Cache) derivedOf(r Reads, vg, key string) (any, bool) {
	if x.fromCache(r) {
		x.checkPrint(vg)
	}
	x.mu.Lock()
	e, found := x.lvs[vg]
	d, kept := x.derived[vg+"\x00"+key]
	gen := x.gens[vg]
	x.mu.Unlock()
	if !found || !kept || e.gen != gen || d.gen != e.gen || !d.at.Equal(e.at) {
		return nil, false
	}
	return d.v, x.usable(r, "lvs "+vg, gen, e.at)
}
