package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// NodeGetVolumeStats reports usage of a published volume: bytes and inodes of
// its filesystem, or the size of a block volume. Health is NodeGetVolumeHealth's.
// A path that does not show this volume is NOT_FOUND, as CSI words it ("the
// volume does not exist on the specified path"), a malformed one included.
//
// kubelet asks it for every volume every minute, so LVM may answer from a
// recent report (lvm.Cached). That is safe here: the volume's
// device number from the report must still match the device node the
// kernel shows (resolveDevice), and only sizes are read.
func (n *Node) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	dev, block, err := n.volumeAt(ctx, lvm.Cached, req.GetVolumeId(), req.GetVolumePath(), volume.ErrNotFound)
	if err != nil {
		return nil, err
	}
	if block {
		size, err := nodefs.BlockSize(dev.Path)
		if err != nil {
			return nil, err
		}
		return &csi.NodeGetVolumeStatsResponse{
			Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: size}},
		}, nil
	}
	s, err := nodefs.PathStats(req.GetVolumePath())
	if err != nil {
		return nil, err
	}
	return &csi.NodeGetVolumeStatsResponse{
		Usage: []*csi.VolumeUsage{
			{Unit: csi.VolumeUsage_BYTES, Total: s.TotalBytes, Available: s.AvailableBytes, Used: s.UsedBytes},
			{Unit: csi.VolumeUsage_INODES, Total: s.TotalInodes, Available: s.FreeInodes, Used: s.UsedInodes},
		},
	}, nil
}

// volumeAt checks a request about a volume at a path (stats, expansion):
// both are given, the volume is this node's and published (resolveDevice),
// and the path shows it. block tells what the path shows:
//   - false: a mount of the volume's whole filesystem (staging or publish),
//     inside the CO's directory;
//   - true: a node of the volume's device, bound into place or, as kubelet
//     hands out to expand a raw block volume, the device node itself in
//     /dev (outside the CO's directory, but the volume's own device: only
//     its size is read).
//
// A path that shows anything else is refused with notOurs; a missing one
// is NOT_FOUND; one the CO could not mean (checkPath) is INVALID_ARGUMENT,
// unless notOurs is NOT_FOUND: then it is that too.
func (n *Node) volumeAt(ctx context.Context, r lvm.Reads, volumeID, path string, notOurs error) (dev volumeDevice, block bool, err error) {
	if volumeID == "" {
		return volumeDevice{}, false, invalidArgument("volume id missing")
	}
	if path == "" {
		return volumeDevice{}, false, invalidArgument("volume path missing")
	}
	if dev, err = n.resolveDevice(ctx, r, volumeID); err != nil {
		return volumeDevice{}, false, err
	}
	if rdev, err := nodefs.DeviceNumber(path); err == nil && rdev == dev.Rdev {
		return dev, true, nil
	}
	if err := n.checkVolumePath(path, notOurs); err != nil {
		return volumeDevice{}, false, err
	}
	mounted, err := nodefs.FilesystemOf(path, dev.Rdev)
	if err != nil {
		return volumeDevice{}, false, err
	}
	if !mounted {
		return volumeDevice{}, false, fmt.Errorf("%w: volume %s is not mounted at %s", notOurs, dev.ID, path)
	}
	return dev, false, nil
}

// checkVolumePath is checkPath and Resolve for volumeAt, with its codes.
func (n *Node) checkVolumePath(path string, notOurs error) error {
	err := n.checkPath("volume path", path)
	if err == nil {
		var exists bool
		exists, err = n.cfg.PathRoot.Resolve(path)
		if !exists && (err == nil || errors.Is(err, fs.ErrNotExist)) {
			return fmt.Errorf("%w: volume path %s does not exist", volume.ErrNotFound, path)
		}
	}
	if err != nil && errors.Is(notOurs, volume.ErrNotFound) {
		// %v: the code is NotFound whatever the cause's own would be.
		return fmt.Errorf("%w: %v", volume.ErrNotFound, err) //nolint:errorlint // see above
	}
	return err
}
