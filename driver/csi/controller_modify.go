package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/volume"
)

// canModify tells a backend that changes live volumes (Modifier).
func (c *Controller) canModify() bool {
	_, ok := c.backend.(Modifier)
	return ok
}

// keepsRecords tells a backend that keeps a record of each volume beside
// its LV (RecordKeeper).
func (c *Controller) keepsRecords() bool {
	_, ok := c.backend.(RecordKeeper)
	return ok
}

// ControllerModifyVolume applies mutable parameters to an existing volume,
// online. Keys that are not mutable are INVALID_ARGUMENT before anything
// is looked at; an ID Carve could not have made is NOT_FOUND. An empty set
// changes nothing (the volume must still exist). The backend decides
// whether the volume can take the change (see lvmvol.ModifyVolume).
func (c *Controller) ControllerModifyVolume(ctx context.Context, req *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	m, err := parseMutable(req.GetMutableParameters())
	if err != nil {
		return nil, err
	}
	mod, ok := c.backend.(Modifier)
	if !ok {
		return nil, volume.ErrUnimplemented
	}
	id, err := volume.ParseID(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if _, err := mod.ModifyVolume(ctx, id, m); err != nil {
		return nil, err
	}
	return &csi.ControllerModifyVolumeResponse{}, nil
}
