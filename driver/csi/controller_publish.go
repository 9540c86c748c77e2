package csi

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/volume"
)

// ControllerPublishVolume is Carve's attach: it activates the LV on the
// node that holds it and hands back the device path.
func (c *Controller) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	if req.GetNodeId() == "" {
		return nil, invalidArgument("node id missing")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	// A read-only request needs nothing at attach time: the LV is activated
	// read-write and NodePublishVolume mounts it read-only.
	id, err := volume.ParseID(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	device, err := c.backend.PublishVolume(ctx, id, req.GetNodeId())
	if err != nil {
		return nil, err
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{publishDeviceKey: device}}, nil
}

// ControllerUnpublishVolume is Carve's detach: the LV is deactivated, once
// the node has let go of it.
func (c *Controller) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	id, err := volume.ParseID(req.GetVolumeId())
	if errors.Is(err, volume.ErrInvalidID) {
		return &csi.ControllerUnpublishVolumeResponse{}, nil // not ours: not published
	}
	if err := c.backend.UnpublishVolume(ctx, id, req.GetNodeId()); err != nil {
		return nil, err
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}
