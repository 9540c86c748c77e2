package lvmfake

import (
	"context"
	"fmt"
	"slices"

	"carve.dev/carve/lvm"
)

// ThinChunk is the chunk size of the fake's thin pools: lvm2's default
// for small pools.
const ThinChunk = 64 << 10

// thinMaps are the fake's thin pool metadata: each thin LV's mapped
// chunks (by vg/name), each to a data block. A thin snapshot shares its
// origin's blocks; a write gives each chunk it touches a new one (dm-thin
// breaks the sharing, or allocates).
type thinMaps struct {
	next  uint64
	chunk map[string]map[uint64]uint64
}

// WriteThin writes length bytes at offset of thin LV vg/name, as the
// kernel's pool would map them.
func (f *LVM) WriteThin(vg, name string, offset, length uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := vg + "/" + name
	if f.thin.chunk == nil {
		f.thin.chunk = map[string]map[uint64]uint64{}
	}
	if f.thin.chunk[key] == nil {
		f.thin.chunk[key] = map[uint64]uint64{}
	}
	for c := offset / ThinChunk; c*ThinChunk < offset+length; c++ {
		f.thin.next++
		f.thin.chunk[key][c] = f.thin.next
	}
}

// shareThin gives a new thin snapshot its origin's blocks. f.mu is held.
func (f *LVM) shareThin(vg, origin, name string) {
	if m := f.thin.chunk[vg+"/"+origin]; m != nil {
		clone := make(map[uint64]uint64, len(m))
		for c, b := range m {
			clone[c] = b
		}
		f.thin.chunk[vg+"/"+name] = clone
	}
}

// ThinAllocated hands each the merged ranges of thin LV vg/lv's mapped
// chunks that end after from, as lvm.Client.ThinAllocated does. Between
// ranges it calls OnThinRange, and stops when ctx is done (the real
// tool is killed).
func (f *LVM) ThinAllocated(ctx context.Context, vg, lv string, from uint64, each func(lvm.Range) error) error {
	f.mu.Lock()
	if err := f.call("ThinAllocated"); err != nil {
		f.mu.Unlock()
		return err
	}
	l, err := f.thinLV(vg, lv, "")
	var chunks []uint64
	for c := range f.thin.chunk[vg+"/"+lv] {
		chunks = append(chunks, c)
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.sendChunks(ctx, chunks, from, l.Size, each)
}

// ThinDelta is ThinAllocated of the chunks base and target map to
// different blocks, or only one of them maps.
func (f *LVM) ThinDelta(ctx context.Context, vg, base, target string, from uint64, each func(lvm.Range) error) error {
	f.mu.Lock()
	if err := f.call("ThinDelta"); err != nil {
		f.mu.Unlock()
		return err
	}
	b, err := f.thinLV(vg, base, "")
	var t lvm.LV
	if err == nil {
		t, err = f.thinLV(vg, target, b.PoolLV)
	}
	var chunks []uint64
	bm, tm := f.thin.chunk[vg+"/"+base], f.thin.chunk[vg+"/"+target]
	for c, blk := range bm {
		if tm[c] != blk {
			chunks = append(chunks, c)
		}
	}
	for c := range tm {
		if _, ok := bm[c]; !ok {
			chunks = append(chunks, c)
		}
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.sendChunks(ctx, chunks, from, t.Size, each)
}

// thinLV is a thin LV of vg, in pool when pool is not "". f.mu is held.
func (f *LVM) thinLV(vg, name, pool string) (lvm.LV, error) {
	l, ok := f.lvs[vg][name]
	switch {
	case !ok:
		return lvm.LV{}, fmt.Errorf("%w: LV %s/%s", lvm.ErrNotFound, vg, name)
	case l.PoolLV == "":
		return lvm.LV{}, fmt.Errorf("%w: %s/%s is not a thin LV", lvm.ErrInvalidArgument, vg, name)
	case pool != "" && l.PoolLV != pool:
		return lvm.LV{}, fmt.Errorf("%w: %s/%s is in thin pool %s, not %s", lvm.ErrInvalidArgument, vg, name, l.PoolLV, pool)
	}
	return *l, nil
}

// sendChunks merges chunks into ranges, limited to size, and hands on
// those ending after from.
func (f *LVM) sendChunks(ctx context.Context, chunks []uint64, from, size uint64, each func(lvm.Range) error) error {
	slices.Sort(chunks)
	var cur lvm.Range
	flush := func() error {
		if cur.Length == 0 || cur.End() <= from {
			return nil
		}
		if f.OnThinRange != nil {
			f.OnThinRange()
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("thin_dump: %w", err)
		}
		return each(cur)
	}
	for _, c := range chunks {
		r := lvm.Range{Offset: c * ThinChunk, Length: min(ThinChunk, size-min(size, c*ThinChunk))}
		if r.Length == 0 {
			continue
		}
		if cur.Length > 0 && cur.End() == r.Offset {
			cur.Length += r.Length
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		cur = r
	}
	return flush()
}

// ReleaseMetadataSnaps releases nothing: the fake's reads hold no
// metadata snapshot.
func (f *LVM) ReleaseMetadataSnaps(_ context.Context, _ string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil, f.call("ReleaseMetadataSnaps")
}
