package lvmvol

import (
	"context"
	"fmt"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// lvOptions are lvcreate's options for a volume of type t.
func lvOptions(t volume.Type, vg lvm.VG, name string, size uint64, tags []string) lvm.CreateLVOptions {
	return lvm.CreateLVOptions{VG: vg.Name, Name: name, Size: size, Tags: tags, ExtentSize: vg.ExtentSize,
		Stripes: t.Stripes, StripeSize: t.StripeSize, Mirrors: t.Mirrors, ThinPool: t.ThinPool, RAID: t.RAID, Integrity: t.Integrity}
}

// thinPool returns the pool a thin volume of t goes to, refusing pools
// that would hand out a former thin volume's blocks unzeroed.
func (m *Manager) thinPool(ctx context.Context, r lvm.Reads, vg string, t volume.Type) (lvm.LV, error) {
	pool, err := m.lvm.GetLV(ctx, r, vg, t.ThinPool)
	if err != nil {
		return lvm.LV{}, fmt.Errorf("thin pool %s/%s: %w", vg, t.ThinPool, err)
	}
	if !pool.IsThinPool() {
		return lvm.LV{}, fmt.Errorf("%s/%s is not a thin pool: %w", vg, t.ThinPool, volume.ErrBadPool)
	}
	if !pool.Live() {
		// An inactive pool reports no usage (lvm2 reads it from the kernel);
		// one whose activation was cut short no more (see lvm.LV.Live).
		// Activating the pool exposes no volume: only its thin LVs carry
		// data, and they stay as they are.
		if err := m.lvm.Activate(ctx, vg, t.ThinPool); err != nil {
			return lvm.LV{}, fmt.Errorf("activate thin pool %s/%s to read its usage: %w", vg, t.ThinPool, err)
		}
		if pool, err = m.lvm.GetLV(ctx, r, vg, t.ThinPool); err != nil {
			return lvm.LV{}, fmt.Errorf("thin pool %s/%s: %w", vg, t.ThinPool, err)
		}
	}
	if !zeroesNewBlocks(pool) {
		return lvm.LV{}, fmt.Errorf("thin pool %s/%s does not zero new blocks, so a new volume could read a deleted one's data; "+
			"run `lvchange --zero y %s/%s`: %w", vg, t.ThinPool, vg, t.ThinPool, volume.ErrBadPool)
	}
	return pool, nil
}

// thinRoom refuses a thin volume of size beyond what pool has room for.
func (m *Manager) thinRoom(pool lvm.LV, size uint64, t volume.Type) error {
	if err := checkNewThin(pool); err != nil {
		return err
	}
	if room := volume.ThinRoom(pool.ThinPoolFree(), m.overprovision); size > room {
		return fmt.Errorf("thin volume of %s does not fit thin pool %s/%s: %s free × %.2f over-provisioning = %s: %w",
			lvm.FormatSize(size), pool.VGName, t.ThinPool, lvm.FormatSize(pool.ThinPoolFree()), m.overprovision,
			lvm.FormatSize(room), lvm.ErrNoSpace)
	}
	return nil
}

// zeroesNewBlocks reads the pool's zero flag (lv_attr position 8).
func zeroesNewBlocks(pool lvm.LV) bool { return len(pool.Attr) > 7 && pool.Attr[7] == 'z' }

// checkRoom refuses, before any lvcreate, a volume of size that cannot be
// carved: thin beyond the pool's room, thick beyond the VG's free extents
// or the PVs raid and stripes need.
func (m *Manager) checkRoom(ctx context.Context, r lvm.Reads, vg lvm.VG, opts lvm.CreateLVOptions, t volume.Type) error {
	if t.IsThin() {
		pool, err := m.thinPool(ctx, r, vg.Name, t)
		if err != nil {
			return err
		}
		return m.thinRoom(pool, opts.Size, t)
	}
	if need := lvm.Footprint(opts, vg.ExtentSize); need > vg.Free {
		return fmt.Errorf("volume needs %s of volume group %s, which has %s free: %w",
			lvm.FormatSize(need), vg.Name, lvm.FormatSize(vg.Free), lvm.ErrNoSpace)
	}
	return m.lvm.CheckPlacement(ctx, opts)
}

// thinMetadataReserve is what lvm2 keeps free of a thin pool's metadata
// before it makes a new thin LV there (its pool_metadata_min_threshold):
// 4 MiB, or a quarter of a metadata LV smaller than 16 MiB. The kernel maps
// every block the existing thin LVs write in that metadata; a pool that runs
// out of it stops taking writes to new blocks (it goes read-only), so new
// thin LVs, which share that room, must not bring it closer.
const thinMetadataReserve = 4 << 20

// thinMetadataLimit is the metadata use, in percent, at which lvm2 refuses
// new thin LVs (volumes and snapshots) in pool.
func thinMetadataLimit(pool lvm.LV) float64 {
	free := 25.0
	if pool.MetadataSize > 0 {
		free = min(free, 100*float64(thinMetadataReserve)/float64(pool.MetadataSize))
	}
	return 100 - free
}

// checkNewThin refuses, before lvcreate, any new thin LV in a pool whose
// data is full or whose metadata is at lvm2's limit (thinMetadataLimit):
// lvm2 would refuse it too ("free space in thin pool reached threshold"),
// with a message nothing tells from other failures. Thin snapshots and thin
// restores need no data room, but the same metadata.
func checkNewThin(pool lvm.LV) error {
	ref := pool.VGName + "/" + pool.Name
	if pool.DataPercent >= 100 {
		return fmt.Errorf("thin pool %s is out of data space: %w", ref, lvm.ErrNoSpace)
	}
	if limit := thinMetadataLimit(pool); pool.MetadataPercent >= limit {
		return fmt.Errorf("thin pool %s has used %.2f%% of its %s of metadata; new thin volumes need less than %.2f%% "+
			"(extend it: lvextend --poolmetadatasize): %w", ref, pool.MetadataPercent, lvm.FormatSize(pool.MetadataSize), limit, lvm.ErrNoSpace)
	}
	return nil
}
