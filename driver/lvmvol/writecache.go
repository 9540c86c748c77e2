package lvmvol

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
)

// Write caches: ModifyVolume's writeCache (volume.WriteCache), a
// dm-writecache in front of a thick volume (lvm.AttachWriteCache).
//
// # State
//
// The cache is an LV of its own, the cachevol, named cacheVolName and
// tagged tagCacheOf+<volume>, made on the PVs the request names and then
// attached; lvm2 hides it while attached. The volume's tag
// tagWriteCachePrefix records the cache it was last given (size and a
// digest of the PVs). The tag is set only while no cache is attached,
// right before the cachevol is made, and goes once the cache and its
// cachevol are gone. So a cache attached and a tag saying the same mean
// the cache asked for is the one there; and a cachevol of the volume
// exists only while the tag is on (or a cache attached): a volume with
// neither costs no lookup of one.
//
// # Idempotency and crashes
//
// Every call reads what is attached and converges from there; the same
// call twice runs no changing command. A crash
//   - after the tag, before the cachevol: the retry finds no cache and no
//     cachevol, and makes them;
//   - after the cachevol, before the attach: the cachevol is left, visible
//     and inactive; the retry wipes and removes it (dropLeftover) and
//     makes a new one, as it does with any leftover;
//   - during the attach: lvm2 commits the attach in one metadata write;
//   - during a detach (flushing, lvm2 cleans the cache before it splits
//     it off): the cache is still attached, the retry detaches it again;
//   - after the split, before the cachevol's removal: the leftover holds
//     copies of the volume's data, and the tag is still on; the retry
//     wipes and removes it.
//
// The cachevol is wiped before it is removed, as a deleted volume is: its
// extents go back to the VG holding the volume's data otherwise.
// DeleteVolume detaches the cache the same way before it wipes the
// volume: a wipe through the cache would leave the volume's own PVs
// unzeroed wherever the zeroes still sat in the cache when lvremove
// dropped it.

// cacheVolName is the cachevol's LV name: '_' never appears in a volume's
// LV name (volume.LVName), so it never names a volume.
func cacheVolName(lv string) string { return lv + "_wcache" }

// writeCacheTag is the tag recording c (none for no cache).
func writeCacheTag(c volume.WriteCache) string {
	if c.Size == 0 {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.Join(c.On, "\x00")))
	return tagWriteCachePrefix + strconv.FormatUint(c.Size, 10) + ":" + hex.EncodeToString(sum[:8])
}

// changeWriteCache gives lv the write cache want (Size 0: none) and
// returns lv as it then is. See the comment at the top of this file.
func (m *Manager) changeWriteCache(ctx context.Context, r lvm.Reads, lv lvm.LV, want volume.WriteCache) (lvm.LV, error) {
	if err := m.canCache(lv, want); err != nil {
		return lv, err
	}
	wantTag, haveTag := writeCacheTag(want), tagValue(lv, tagWriteCachePrefix)
	if haveTag != "" {
		haveTag = tagWriteCachePrefix + haveTag
	}
	attached := lv.HasWriteCache()
	if attached && haveTag == wantTag || !attached && haveTag == "" && want.Size == 0 {
		return lv, nil
	}
	if err := m.dropCache(ctx, r, lv); err != nil {
		return lv, err
	}
	if want.Size > 0 {
		if err := m.attachCache(ctx, lv, want, haveTag, wantTag); err != nil {
			return lv, err
		}
	} else if haveTag != "" {
		if err := m.lvm.RemoveTags(ctx, lv.VGName, lv.Name, haveTag); err != nil {
			return lv, fmt.Errorf("record no write cache: %w", err)
		}
	}
	return m.lvm.GetLV(ctx, r, lv.VGName, lv.Name)
}

// canCache refuses, before any change, a cache the volume cannot take:
// what its type cannot take (volume.Type.CanCache); a volume a copy reads
// through a frozen point is busy until the copy ends. Asking for no cache
// is always possible.
func (m *Manager) canCache(lv lvm.LV, want volume.WriteCache) error {
	if want.Size == 0 {
		return nil
	}
	if err := typeOf(lv).CanCache(); err != nil {
		return err
	}
	if lv.HasCOWSnapshots() {
		return fmt.Errorf("a copy reads it through a frozen point, change it when that is done: %w", volume.ErrOperationPending)
	}
	return lvm.ValidatePVRefs(want.On)
}

// attachCache records want on lv, makes its cachevol and attaches it
// (lv has no cache and no leftover cachevol).
func (m *Manager) attachCache(ctx context.Context, lv lvm.LV, want volume.WriteCache, haveTag, wantTag string) error {
	ref := lv.VGName + "/" + lv.Name
	if haveTag != wantTag { // a retry after a crash may find it recorded
		var remove []string
		if haveTag != "" {
			remove = []string{haveTag}
		}
		if err := m.lvm.ChangeTags(ctx, lv.VGName, lv.Name, []string{wantTag}, remove); err != nil {
			return fmt.Errorf("record write cache of %s: %w", ref, err)
		}
	}
	cvol := cacheVolName(lv.Name)
	if err := m.lvm.CreateCacheVol(ctx, lv.VGName, cvol, want.Size, lv.ExtentSize, want.On,
		[]string{tagCacheOfPrefix + lv.Name}); err != nil {
		return fmt.Errorf("write cache of %s on %v: %w", ref, want.On, err)
	}
	if err := m.lvm.AttachWriteCache(ctx, lv.VGName, lv.Name, cvol); err != nil {
		return err
	}
	klog.InfoS("Attached write cache", "lv", ref, "bytes", want.Size, "on", want.On)
	return nil
}

// dropCache takes lv's cache away, if it has one or may have a leftover
// of one (its tag is on): it writes the cache back and splits it off,
// then wipes and removes the cachevol. The tag stays (see the top of this
// file). lvconvert runs as data work, detached from the caller: the flush
// takes as long as the dirty blocks take to write, and cut short it would
// leave lvm2 mid-way.
func (m *Manager) dropCache(ctx context.Context, r lvm.Reads, lv lvm.LV) error {
	if !lv.HasWriteCache() && tagValue(lv, tagWriteCachePrefix) == "" {
		return nil
	}
	if lv.HasWriteCache() {
		work, done := runner.DataWork(context.WithoutCancel(ctx), runner.DataBudget(int64(lv.Size)))
		err := m.lvm.SplitCache(work, lv.VGName, lv.Name)
		done()
		if err != nil {
			return err
		}
		klog.InfoS("Detached write cache, its blocks written back", "lv", lv.VGName+"/"+lv.Name)
	}
	return m.dropLeftover(ctx, r, lv.VGName, lv.Name)
}

// dropLeftover wipes and removes the cachevol of LV name left visible
// (see the top of this file), if there is one: an LV of that name is
// only removed when it carries Carve's mark for this volume.
func (m *Manager) dropLeftover(ctx context.Context, r lvm.Reads, vg, name string) error {
	cv, found, err := m.findLV(ctx, r, vg, cacheVolName(name))
	if !found {
		return err
	}
	if !cv.HasTag(tagCacheOfPrefix + name) {
		return fmt.Errorf("%w: LV %s/%s is in the way of the write cache of %s and is not Carve's",
			volume.ErrFailedPrecondition, vg, cv.Name, name)
	}
	work, done := runner.DataWork(context.WithoutCancel(ctx), runner.DataBudget(int64(cv.Size)))
	defer done()
	if err := m.wipe(work, cv, false, nil); err != nil {
		return err
	}
	if err := m.lvm.RemoveLVOf(work, cv); err != nil {
		return fmt.Errorf("remove cachevol %s/%s: %w", vg, cv.Name, err)
	}
	return nil
}
