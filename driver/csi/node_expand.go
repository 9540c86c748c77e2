package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// NodeExpandVolume grows the filesystem of a published volume to fill its
// LV, online (resize2fs, xfs_growfs); the device above the LV grows first:
// an encrypted volume's mapping, with the node-expand secret's key, or the
// linear layer. A block volume has nothing to grow:
// its device already has the new size. The volume path must show this
// volume (volumeAt): another volume's mount is never grown for it.
func (n *Node) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	dev, block, err := n.volumeAt(ctx, lvm.Fresh, req.GetVolumeId(), req.GetVolumePath(), volume.ErrFailedPrecondition)
	if err != nil {
		return nil, err
	}
	if block {
		size, err := nodefs.BlockSize(dev.Path)
		if err != nil {
			return nil, err
		}
		return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
	}
	if dev.Encrypted {
		err = n.growMapping(ctx, dev, req.GetSecrets())
	} else {
		err = n.growLayer(ctx, dev)
	}
	if err != nil {
		return nil, err
	}
	if err := n.fs.ResizeFS(ctx, dev.Path, req.GetVolumePath()); err != nil {
		return nil, err
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: dev.SizeBytes}, nil
}

// growIfNeeded grows a just-staged filesystem that is smaller than its LV:
// the volume was expanded while not staged, or restored into a larger one.
func (n *Node) growIfNeeded(ctx context.Context, device, staging string) error {
	need, err := n.fs.NeedsResize(ctx, device, staging)
	if err != nil || !need {
		return err
	}
	return n.fs.ResizeFS(ctx, device, staging)
}
