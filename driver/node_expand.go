package driver

import (
	"context"
	"fmt"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/nodefs"
)

// NodeExpandVolume grows the filesystem of a published volume to fill its
// LV, online (resize2fs, xfs_growfs). A block volume has nothing to grow:
// its device already has the new size.
func (n *Node) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	vol, fi, err := n.volumeAt(ctx, req.GetVolumeId(), req.GetVolumePath())
	if err != nil {
		return nil, err
	}
	if req.GetVolumeCapability().GetBlock() != nil || fi.Mode()&os.ModeDevice != 0 {
		size, err := nodefs.BlockSize(vol.DevicePath)
		if err != nil {
			return nil, err
		}
		return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
	}
	if mounted, err := n.fs.IsMountPoint(req.GetVolumePath()); err != nil || !mounted {
		return nil, fmt.Errorf("%w: volume is not mounted at %s", errNotFound, req.GetVolumePath())
	}
	if err := n.fs.ResizeFS(ctx, vol.DevicePath, req.GetVolumePath()); err != nil {
		return nil, err
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: vol.SizeBytes}, nil
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
