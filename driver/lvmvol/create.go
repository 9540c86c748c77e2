package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// CreateVolume carves the volume, or returns the one an earlier call with the
// same name and arguments carved (CSI idempotency; see doc.go for crash
// safety). The new volume is inactive: only PublishVolume activates it.
func (m *Manager) CreateVolume(ctx context.Context, req volume.CreateRequest) (volume.Volume, error) {
	if req.Node != "" && req.Node != m.node {
		return volume.Volume{}, fmt.Errorf("volume %q asked on node %q; this driver carves on %q: %w", req.Name, req.Node, m.node, volume.ErrWrongNode)
	}
	// Its reads (a source, a thin pool, the name after a refusal) share
	// one fresh report of the VG until a change (see sharedReads).
	r := sharedReads()
	name := volume.LVName(req.Name)
	if req.VGs != nil {
		vg, err := m.pickVG(ctx, r, req, name)
		if err != nil {
			return volume.Volume{}, fmt.Errorf("volume %q: %w", req.Name, err)
		}
		req.VG = vg
		klog.V(2).InfoS("Volume group picked", "name", req.Name, "vg", vg, "choice", req.VGs.String(), "policy", req.VGs.Policy)
	}
	var src lvm.LV
	if req.Source != nil {
		var err error
		if m.isRemote(req.Source) {
			err = m.settleRemoteSource(&req)
		} else {
			src, err = m.resolveSource(ctx, r, &req)
		}
		if err != nil {
			return volume.Volume{}, err
		}
	}
	if err := m.checkVG(req.VG); err != nil {
		return volume.Volume{}, err
	}
	// No lookup of the name first: lvcreate is that lookup. On a name
	// already taken it fails having changed nothing, and only then is the
	// LV read and judged (adopt). The same goes for a check that refuses
	// before lvcreate (no room, a bad pool, a size out of range): a retry
	// of a create that succeeded must still get its volume when the VG has
	// filled up since. So a first CreateVolume, by far the most common
	// call, runs no lvs that fails, and a retry one lvcreate that fails.
	vol, created, err := m.carve(ctx, r, req, src, name)
	if err == nil || created {
		return vol, err
	}
	lv, lerr := m.lvm.GetLV(ctx, r, req.VG, name)
	switch {
	case lerr == nil:
		return m.adopt(ctx, r, lv, req)
	case errors.Is(lerr, lvm.ErrNotFound):
		return volume.Volume{}, err
	}
	return volume.Volume{}, fmt.Errorf("look up %s/%s: %w", req.VG, name, lerr)
}

// carve creates the LV of a new volume named name. created tells whether
// its lvcreate succeeded: until then a failure may mean that the name is
// taken (see CreateVolume).
func (m *Manager) carve(ctx context.Context, r lvm.Reads, req volume.CreateRequest, src lvm.LV, name string) (vol volume.Volume, created bool, err error) {
	// Nothing of a VG with a PV missing is changed (see changeableVG),
	// so each path reads a report that tells it before its lvcreate. A
	// thin volume needs its pool's report, which tells it (lvs reports
	// the VG's missing PVs with each LV) and the VG's extent size: the
	// VG's own report (vgs) is for thick volumes, whose room is the VG's
	// free space.
	var pool lvm.LV
	var vg lvm.VG
	if req.Type.IsThin() {
		if pool, err = m.thinPool(ctx, r, req.VG, req.Type); err != nil {
			if errors.Is(err, lvm.ErrNotFound) {
				// No pool, or no VG lvm2 can read (see lookupLV).
				if _, vgErr := m.readVG(ctx, r, req.VG); vgErr != nil {
					return volume.Volume{}, false, fmt.Errorf("volume group %s: %w", req.VG, vgErr)
				}
			}
			return volume.Volume{}, false, err
		}
		if err := changeableLV(pool); err != nil {
			return volume.Volume{}, false, fmt.Errorf("volume group %s: %w", req.VG, err)
		}
		vg = lvm.VG{Name: req.VG, ExtentSize: pool.ExtentSize}
	}
	if vg.ExtentSize == 0 {
		if vg, err = m.changeableVG(ctx, r, req.VG); err != nil {
			return volume.Volume{}, false, fmt.Errorf("volume group %s: %w", req.VG, err)
		}
	}
	size, err := sizeFor(req, vg.ExtentSize*uint64(max(1, req.Type.Stripes)))
	if err != nil {
		return volume.Volume{}, false, err
	}
	if req.Source != nil {
		return m.createFromSource(ctx, r, req, src, name, size, vg, pool)
	}
	if req.Type.IsThin() {
		return m.createThin(ctx, req, vg, pool, name, size)
	}
	opts := lvOptions(req.Type, vg, name, size, createTags(req))
	if err := m.checkRoom(ctx, r, vg, opts, req.Type); err != nil {
		return volume.Volume{}, false, fmt.Errorf("volume %q: %w", req.Name, err)
	}
	// The read-back is skipped: finishCreate needs the LV's name, tags and
	// activation, which lvcreate's success tells (a thick LV is active).
	opts.SkipReadBack = true
	lv, err := m.lvm.CreateLV(ctx, opts)
	if err != nil {
		return volume.Volume{}, false, fmt.Errorf("create volume %q: %w", req.Name, err)
	}
	klog.InfoS("Created logical volume", "name", req.Name, "lv", req.VG+"/"+name, "bytes", lv.Size)
	vol, err = m.finishCreate(ctx, lv)
	return vol, true, err
}

// createThin creates a thin volume in one lvm2 run: lvcreate -an with the
// volume's final tags, no pending one. A thick LV needs the pending tag
// because lvm2 makes it active (to zero it) and its deactivation is a
// second step; a thin LV is made inactive by the same metadata commit
// that makes it, so there is no step to finish: a crash before the commit
// leaves no LV, after it a settled volume, which a retry adopts as is.
func (m *Manager) createThin(ctx context.Context, req volume.CreateRequest, vg lvm.VG, pool lvm.LV, name string, size uint64) (volume.Volume, bool, error) {
	if err := m.thinRoom(pool, size, req.Type); err != nil {
		return volume.Volume{}, false, fmt.Errorf("volume %q: %w", req.Name, err)
	}
	opts := lvOptions(req.Type, vg, name, size, settledTags(req))
	opts.Inactive, opts.SkipReadBack = true, true
	lv, err := m.lvm.CreateLV(ctx, opts)
	if err != nil {
		return volume.Volume{}, false, fmt.Errorf("create volume %q: %w", req.Name, err)
	}
	klog.InfoS("Created logical volume", "name", req.Name, "lv", req.VG+"/"+name, "bytes", lv.Size)
	return m.volumeOf(lv), true, nil
}

// adopt decides whether an existing LV is the volume req asks for.
func (m *Manager) adopt(ctx context.Context, r lvm.Reads, lv lvm.LV, req volume.CreateRequest) (volume.Volume, error) {
	ref := lv.VGName + "/" + lv.Name
	if !isManaged(lv) {
		return volume.Volume{}, fmt.Errorf("logical volume %s exists and is not Carve's: %w", ref, volume.ErrNameConflict)
	}
	if !isSettled(lv) || lv.HasTag(tagCopying) {
		// Its create or delete goes on below, changing the VG; a settled
		// volume is only answered. lv's report tells the VG's missing PVs.
		if err := changeableLV(lv); err != nil {
			return volume.Volume{}, err
		}
	}
	if lv.HasTag(tagDeleting) {
		// A deletion was interrupted: finish it, then carve afresh, so that
		// half-wiped data is never handed out.
		if err := m.removeData(ctx, r, lv, false); err != nil {
			return volume.Volume{}, err
		}
		return m.CreateVolume(ctx, req)
	}
	if lv.HasTag(tagPending) && strings.HasPrefix(lv.Layout, "raid") {
		cut, err := m.dropCutShortRAID(ctx, r, lv)
		if err != nil {
			return volume.Volume{}, err
		}
		if cut {
			return m.CreateVolume(ctx, req)
		}
	}
	if got := tagValue(lv, tagParamsPrefix); got != req.ParamsDigest {
		return volume.Volume{}, fmt.Errorf("volume %q exists with other parameters: %w", req.Name, volume.ErrNameConflict)
	}
	if got := typeOf(lv).Mirrors; got != req.Type.Mirrors {
		// Mirrors may come from mutable parameters, which the digest
		// leaves out: the volume's recorded legs are what it has been
		// asked for last (see ModifyVolume).
		return volume.Volume{}, fmt.Errorf("volume %q exists with %d mirrors, not %d: %w", req.Name, got, req.Type.Mirrors, volume.ErrNameConflict)
	}
	if !m.sourceMatches(lv, req.Source) {
		return volume.Volume{}, fmt.Errorf("volume %q exists with another content source: %w", req.Name, volume.ErrNameConflict)
	}
	size := int64(lv.Size)
	if lv.HasTag(tagPending) && lv.PoolLV != "" && req.Source != nil && size < req.RequiredBytes &&
		(req.LimitBytes <= 0 || req.RequiredBytes <= req.LimitBytes) {
		// A thin volume made from a source and not grown yet: the create
		// was cut short between its two steps (createFromSource).
		if err := m.lvm.ExtendLV(ctx, lv.VGName, lv.Name, uint64(req.RequiredBytes)); err != nil {
			return volume.Volume{}, fmt.Errorf("grow volume %q: %w", req.Name, err)
		}
		return m.settleNew(ctx, r, lv.VGName, lv.Name)
	}
	if size < req.RequiredBytes || (req.LimitBytes > 0 && size > req.LimitBytes) {
		return volume.Volume{}, fmt.Errorf("volume %q exists with %d bytes, outside [%d, %d]: %w",
			req.Name, size, req.RequiredBytes, req.LimitBytes, volume.ErrNameConflict)
	}
	if lv.HasTag(tagCopying) {
		return m.resumeCopy(ctx, r, lv)
	}
	if lv.HasTag(tagPending) {
		return m.finishCreate(ctx, lv)
	}
	return m.volumeOf(lv), nil
}

// dropCutShortRAID removes a pending raid volume whose lvcreate was killed
// while lvm2 wiped its metadata LVs, which it makes visible for that (see
// lvm.VisibleRAIDParts): lvm2 refuses to activate such an LV ever after,
// so adopting it would hand out a volume no node can publish (found by
// the soak). It reports whether it removed lv. The LV holds nothing to
// wipe: pending, it was never handed out, and lvcreate was cut short
// before a copy could start. Its visible parts may still be active (lvm2
// activated them to wipe them): lvremove takes their devices along, as
// TestCutShortRAIDCreateIsCarvedAgain checks (lvm2 2.03.16), so none is
// left under the names the next lvcreate makes again.
func (m *Manager) dropCutShortRAID(ctx context.Context, r lvm.Reads, lv lvm.LV) (bool, error) {
	ref := lv.VGName + "/" + lv.Name
	all, err := m.lvm.ListAllLVs(ctx, r, lv.VGName)
	if err != nil {
		return false, fmt.Errorf("read raid parts of %s: %w", ref, err)
	}
	parts := lvm.VisibleRAIDParts(all, lv.Name)
	if len(parts) == 0 {
		return false, nil
	}
	klog.InfoS("Removing a raid volume whose create was cut short: lvm2 left its parts visible and would refuse to activate it",
		"lv", ref, "visibleParts", parts)
	if lv.HasTag(tagCopying) {
		if err := m.dropFrozen(ctx, r, lv.VGName, lv.Name); err != nil {
			return false, err
		}
	}
	if err := m.lvm.RemoveLVOf(ctx, lv); err != nil {
		return false, fmt.Errorf("remove cut-short raid volume %s: %w", ref, err)
	}
	return true, nil
}

// finishCreate leaves a fresh LV inactive and drops its pending tag, in that
// order, so that a crash in between is redone by the next call.
func (m *Manager) finishCreate(ctx context.Context, lv lvm.LV) (volume.Volume, error) {
	if lv.Active {
		if err := m.lvm.Deactivate(ctx, lv.VGName, lv.Name); err != nil {
			return volume.Volume{}, fmt.Errorf("deactivate new volume %s/%s: %w", lv.VGName, lv.Name, err)
		}
		lv.Active = false
	}
	if err := m.lvm.RemoveTags(ctx, lv.VGName, lv.Name, tagPending); err != nil {
		return volume.Volume{}, fmt.Errorf("settle new volume %s/%s: %w", lv.VGName, lv.Name, err)
	}
	return m.volumeOf(lv), nil
}

// sizeFor rounds the requested size up to whole allocation units (extents;
// for striped LVs a full row of extents, as lvm2 rounds) and checks it
// against the limit. Rounding is always up: a volume is never smaller than
// asked.
func sizeFor(req volume.CreateRequest, extent uint64) (uint64, error) {
	if req.RequiredBytes <= 0 {
		return 0, fmt.Errorf("volume %q: required size %d: %w", req.Name, req.RequiredBytes, volume.ErrOutOfRange)
	}
	size := lvm.RoundUp(uint64(req.RequiredBytes), extent)
	if req.LimitBytes > 0 && size > uint64(req.LimitBytes) {
		return 0, fmt.Errorf("volume %q: %d bytes rounded up to %d-byte extents is %d, above the limit %d: %w",
			req.Name, req.RequiredBytes, extent, size, req.LimitBytes, volume.ErrOutOfRange)
	}
	return size, nil
}
