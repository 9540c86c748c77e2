package lvmvol

import (
	"context"
	"errors"
	"fmt"

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
	var src lvm.LV
	if req.Source != nil {
		var err error
		if src, err = m.resolveSource(ctx, &req); err != nil {
			return volume.Volume{}, err
		}
	}
	if err := m.checkVG(req.VG); err != nil {
		return volume.Volume{}, err
	}
	name := volume.LVName(req.Name)
	lv, err := m.lvm.GetLV(ctx, req.VG, name)
	switch {
	case err == nil:
		return m.adopt(ctx, lv, req)
	case !errors.Is(err, lvm.ErrNotFound):
		return volume.Volume{}, fmt.Errorf("look up %s/%s: %w", req.VG, name, err)
	}
	vg, err := m.changeableVG(ctx, req.VG)
	if err != nil {
		return volume.Volume{}, fmt.Errorf("volume group %s: %w", req.VG, err)
	}
	size, err := sizeFor(req, vg.ExtentSize*uint64(max(1, req.Type.Stripes)))
	if err != nil {
		return volume.Volume{}, err
	}
	if req.Source != nil {
		return m.createFromSource(ctx, req, src, name, size, vg)
	}
	opts := lvOptions(req.Type, vg, name, size, createTags(req))
	if err := m.checkRoom(ctx, vg, opts, req.Type); err != nil {
		return volume.Volume{}, fmt.Errorf("volume %q: %w", req.Name, err)
	}
	lv, err = m.lvm.CreateLV(ctx, opts)
	if errors.Is(err, lvm.ErrAlreadyExists) {
		// A concurrent create of the same name won; judge its result.
		if lv, err = m.lvm.GetLV(ctx, req.VG, name); err == nil {
			return m.adopt(ctx, lv, req)
		}
	}
	if err != nil {
		return volume.Volume{}, fmt.Errorf("create volume %q: %w", req.Name, err)
	}
	klog.InfoS("Created logical volume", "name", req.Name, "lv", req.VG+"/"+name, "bytes", lv.Size)
	return m.finishCreate(ctx, lv)
}

// adopt decides whether an existing LV is the volume req asks for.
func (m *Manager) adopt(ctx context.Context, lv lvm.LV, req volume.CreateRequest) (volume.Volume, error) {
	ref := lv.VGName + "/" + lv.Name
	if !isManaged(lv) {
		return volume.Volume{}, fmt.Errorf("logical volume %s exists and is not Carve's: %w", ref, volume.ErrNameConflict)
	}
	if !isSettled(lv) || lv.HasTag(tagCopying) {
		// Its create or delete goes on below, changing the VG; a settled
		// volume is only answered.
		if _, err := m.changeableVG(ctx, lv.VGName); err != nil {
			return volume.Volume{}, err
		}
	}
	if lv.HasTag(tagDeleting) {
		// A deletion was interrupted: finish it, then carve afresh, so that
		// half-wiped data is never handed out.
		if err := m.removeData(ctx, lv); err != nil {
			return volume.Volume{}, err
		}
		return m.CreateVolume(ctx, req)
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
	if !sourceMatches(lv, req.Source) {
		return volume.Volume{}, fmt.Errorf("volume %q exists with another content source: %w", req.Name, volume.ErrNameConflict)
	}
	size := int64(lv.Size)
	if size < req.RequiredBytes || (req.LimitBytes > 0 && size > req.LimitBytes) {
		return volume.Volume{}, fmt.Errorf("volume %q exists with %d bytes, outside [%d, %d]: %w",
			req.Name, size, req.RequiredBytes, req.LimitBytes, volume.ErrNameConflict)
	}
	if lv.HasTag(tagCopying) {
		return m.resumeCopy(ctx, lv)
	}
	if lv.HasTag(tagPending) {
		return m.finishCreate(ctx, lv)
	}
	return m.volumeOf(lv), nil
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
