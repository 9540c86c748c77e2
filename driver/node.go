package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/nodefs"
)

// VolumeReader reads a volume's state from this node's LVM.
type VolumeReader interface {
	GetVolume(ctx context.Context, id lvmvol.ID) (lvmvol.Volume, error)
	StorageHealther
}

// NodeConfig configures the Node service.
type NodeConfig struct {
	NodeID string
	// MaxVolumes is reported to the CO as the attach limit (0: none).
	MaxVolumes int64
	// DeviceWait bounds the wait for a published volume's device node.
	DeviceWait time.Duration
}

// Node is the CSI Node service.
type Node struct {
	csi.UnimplementedNodeServer
	cfg     NodeConfig
	volumes VolumeReader
	fs      *nodefs.Mounter
}

// NewNode serves the node calls for cfg.NodeID.
func NewNode(cfg NodeConfig, v VolumeReader, fs *nodefs.Mounter) *Node {
	if cfg.DeviceWait == 0 {
		cfg.DeviceWait = 30 * time.Second
	}
	return &Node{cfg: cfg, volumes: v, fs: fs}
}

var nodeCaps = []csi.NodeServiceCapability_RPC_Type{
	csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
	csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
	csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH,
	csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
}

func (n *Node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	out := make([]*csi.NodeServiceCapability, 0, len(nodeCaps))
	for _, t := range nodeCaps {
		out = append(out, &csi.NodeServiceCapability{
			Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: out}, nil
}

func (n *Node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             n.cfg.NodeID,
		MaxVolumesPerNode:  n.cfg.MaxVolumes,
		AccessibleTopology: nodeTopology(n.cfg.NodeID),
	}, nil
}

// localID parses a volume ID and checks the volume lives on this node.
func (n *Node) localID(volumeID string) (lvmvol.ID, error) {
	id, err := lvmvol.ParseID(volumeID)
	if err != nil {
		return lvmvol.ID{}, err
	}
	if id.Node != n.cfg.NodeID {
		return lvmvol.ID{}, fmt.Errorf("volume %s lives on node %q, this is %q: %w",
			volumeID, id.Node, n.cfg.NodeID, lvmvol.ErrVolumeNotFound)
	}
	return id, nil
}

// waitDevice waits for the device of a published volume. Its absence means
// ControllerPublishVolume has not activated the LV.
func (n *Node) waitDevice(ctx context.Context, id lvmvol.ID) (string, error) {
	device := lvmvol.DevicePath(id)
	ctx, cancel := context.WithTimeout(ctx, n.cfg.DeviceWait)
	defer cancel()
	if _, err := n.fs.WaitForDevice(ctx, device); err != nil {
		return "", fmt.Errorf("%w: device %s of volume %s did not appear (is the volume published to this node?): %w",
			errFailedPrecondition, device, id, err)
	}
	return device, nil
}
