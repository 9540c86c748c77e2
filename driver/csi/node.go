package csi

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/driver/crypt"
	"carve.dev/carve/driver/internal/keylock"
	"carve.dev/carve/driver/iolimit"
	"carve.dev/carve/driver/mapper"
	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/nodepath"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// VolumeReader reads a volume's state from this node's LVM, as fresh as r
// says.
type VolumeReader interface {
	GetVolume(ctx context.Context, r lvm.Reads, id volume.ID) (volume.Volume, error)
	StorageHealther
}

// NodeConfig configures the Node service.
type NodeConfig struct {
	NodeID string
	// MaxVolumes is reported to the CO as the attach limit (0: none).
	MaxVolumes int64
	// DeviceWait bounds the wait for a published volume's device node.
	DeviceWait time.Duration
	// PathRoot holds every staging and target path the CO may send: its
	// own directory (kubelet's root directory). The zero Root is
	// nodepath.DefaultRoot.
	PathRoot nodepath.Root
	// Crypt opens and closes encrypted volumes; nil on a node that cannot
	// (an encrypted volume is then FAILED_PRECONDITION there).
	Crypt *crypt.Cryptsetup
	// Cgroups is the host's cgroup v2 hierarchy, where kubelet keeps its
	// pods' cgroups; nil on a node that applies no IO limits (a volume
	// with limits is then FAILED_PRECONDITION there).
	Cgroups *iolimit.Cgroups
	// Layers makes the linear layer every staged filesystem of a volume
	// that is not encrypted lives on (mapper.Linear: what a snapshot
	// suspends); nil: filesystems are staged on their LVs.
	Layers *mapper.Linear
}

// Node is the CSI Node service.
type Node struct {
	csi.UnimplementedNodeServer
	cfg     NodeConfig
	volumes VolumeReader
	fs      *nodefs.Mounter
	crypt   *crypt.Cryptsetup
	layers  *mapper.Linear
	// waitDevice waits for a device node and returns its device number
	// (nodefs.Mounter.WaitForDevice; unit tests give their own).
	waitDevice func(ctx context.Context, path string) (uint64, error)
	// limitLocks: one application of a volume's IO limits at a time
	// (node_limits.go).
	limitLocks keylock.Set
}

// NewNode serves the node calls for cfg.NodeID.
func NewNode(cfg NodeConfig, v VolumeReader, fs *nodefs.Mounter) *Node {
	if cfg.DeviceWait == 0 {
		cfg.DeviceWait = 30 * time.Second
	}
	if cfg.PathRoot.Dir() == "" {
		cfg.PathRoot, _ = nodepath.NewRoot(nodepath.DefaultRoot)
	}
	return &Node{cfg: cfg, volumes: v, fs: fs, crypt: cfg.Crypt, layers: cfg.Layers, waitDevice: fs.WaitForDevice}
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

// localID parses a volume ID and checks, without asking LVM, that it can
// name a volume on this node: the shape node/vg/lv (NOT_FOUND otherwise,
// as for any ID Carve never made), this node's ID (NOT_FOUND: the volume
// is not here), and VG and LV names that lvm itself accepts
// (INVALID_ARGUMENT): no ".", "..", "/", reserved or internal names, so
// that /dev/VG/LV cannot lead anywhere but an LV's device.
func (n *Node) localID(volumeID string) (volume.ID, error) {
	id, err := volume.ParseID(volumeID)
	if err != nil {
		return volume.ID{}, err
	}
	if id.Node != n.cfg.NodeID {
		return volume.ID{}, fmt.Errorf("volume %s lives on node %q, this is %q: %w",
			volumeID, id.Node, n.cfg.NodeID, volume.ErrVolumeNotFound)
	}
	for _, err := range []error{lvm.ValidateVGName(id.VG), lvm.ValidateLVName(id.LV)} {
		if err != nil {
			return volume.ID{}, fmt.Errorf("%w: volume %s: %w", volume.ErrInvalidArgument, volumeID, err)
		}
	}
	return id, nil
}
