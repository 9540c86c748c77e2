package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/volume"
)

// ControllerExpandVolume grows the LV, online or not. A filesystem volume
// then needs NodeExpandVolume (or grows at its next stage); a block volume
// is done.
func (c *Controller) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	r := req.GetCapacityRange()
	if r == nil || (r.GetRequiredBytes() <= 0 && r.GetLimitBytes() <= 0) {
		return nil, invalidArgument("capacity range missing")
	}
	if r.GetRequiredBytes() < 0 || r.GetLimitBytes() < 0 || (r.GetLimitBytes() > 0 && r.GetRequiredBytes() > r.GetLimitBytes()) {
		return nil, invalidArgument("capacity range [%d, %d] is invalid", r.GetRequiredBytes(), r.GetLimitBytes())
	}
	id, err := volume.ParseID(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	vol, err := c.backend.ExpandVolume(ctx, id, r.GetRequiredBytes(), r.GetLimitBytes())
	if err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{
		CapacityBytes:         vol.SizeBytes,
		NodeExpansionRequired: req.GetVolumeCapability().GetBlock() == nil,
	}, nil
}
