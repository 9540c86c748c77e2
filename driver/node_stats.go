package driver

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/nodefs"
)

// NodeGetVolumeStats reports usage of a published volume: bytes and inodes of
// its filesystem, or the size of a block volume. Health is NodeGetVolumeHealth's.
func (n *Node) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	_, fi, err := n.volumeAt(ctx, req.GetVolumeId(), req.GetVolumePath())
	if err != nil {
		return nil, err
	}
	path := req.GetVolumePath()
	if fi.Mode()&os.ModeDevice != 0 {
		size, err := nodefs.BlockSize(path)
		if err != nil {
			return nil, err
		}
		return &csi.NodeGetVolumeStatsResponse{
			Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: size}},
		}, nil
	}
	return n.fsStats(path)
}

// volumeAt checks a request about a volume at a path: both are given, the
// volume lives here and exists, and so does the path (NOT_FOUND otherwise).
func (n *Node) volumeAt(ctx context.Context, volumeID, path string) (lvmvol.Volume, os.FileInfo, error) {
	if volumeID == "" {
		return lvmvol.Volume{}, nil, invalidArgument("volume id missing")
	}
	if path == "" {
		return lvmvol.Volume{}, nil, invalidArgument("volume path missing")
	}
	id, err := n.localID(volumeID)
	if err != nil {
		return lvmvol.Volume{}, nil, err
	}
	vol, err := n.volumes.GetVolume(ctx, id)
	if err != nil {
		return lvmvol.Volume{}, nil, err
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return lvmvol.Volume{}, nil, fmt.Errorf("%w: volume path %s does not exist", errNotFound, path)
	}
	if err != nil {
		return lvmvol.Volume{}, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	return vol, fi, nil
}

// fsStats reads a mounted filesystem's usage. An unmounted path would report
// the usage of whatever filesystem holds the directory: refused instead.
func (n *Node) fsStats(path string) (*csi.NodeGetVolumeStatsResponse, error) {
	if mounted, err := n.fs.IsMountPoint(path); err != nil || !mounted {
		return nil, fmt.Errorf("%w: volume is not mounted at %s", errNotFound, path)
	}
	s, err := nodefs.PathStats(path)
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
