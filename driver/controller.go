package driver

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/lvmvol"
)

// Size policy for CreateVolume.
const (
	// DefaultVolumeSize is carved when a request names no size.
	DefaultVolumeSize int64 = 1 << 30
	// minXFSSize: mkfs.xfs (xfsprogs >= 5.19) refuses smaller filesystems,
	// so an xfs volume is carved at least this big rather than fail at stage.
	minXFSSize int64 = 300 << 20
)

// Controller is the CSI Controller service.
type Controller struct {
	csi.UnimplementedControllerServer
	backend Backend
}

// NewController serves the controller calls from backend.
func NewController(b Backend) *Controller { return &Controller{backend: b} }

var controllerCaps = []csi.ControllerServiceCapability_RPC_Type{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
	csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	csi.ControllerServiceCapability_RPC_GET_VOLUME,
	csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH,
	csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH,
	csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
}

func (c *Controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	out := make([]*csi.ControllerServiceCapability, 0, len(controllerCaps))
	for _, t := range controllerCaps {
		out = append(out, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: out}, nil
}

func (c *Controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, invalidArgument("volume name missing")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, invalidArgument("volume content source: snapshots and clones are not supported yet")
	}
	params, err := parseParams(req.GetParameters(), c.backend.VolumeGroups())
	if err != nil {
		return nil, err
	}
	fsType, err := chooseFsType(req.GetVolumeCapabilities(), params.FsType)
	if err != nil {
		return nil, err
	}
	node, err := chooseNode(req.GetAccessibilityRequirements())
	if err != nil {
		return nil, err
	}
	required, limit, err := sizeRange(req.GetCapacityRange(), fsType)
	if err != nil {
		return nil, err
	}
	vol, err := c.backend.CreateVolume(ctx, lvmvol.CreateRequest{
		Name: req.GetName(), VG: params.VG, RequiredBytes: required, LimitBytes: limit,
		ParamsDigest: lvmvol.ParamsDigest(map[string]string{ParamVolumeGroup: params.VG, ParamFsType: fsType}),
	})
	if err != nil {
		return nil, err
	}
	if node != "" && vol.ID.Node != node {
		klog.InfoS("Volume carved off the preferred node", "volume", vol.ID, "preferred", node)
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           vol.ID.String(),
		CapacityBytes:      vol.SizeBytes,
		VolumeContext:      map[string]string{ParamVolumeGroup: vol.ID.VG, ParamFsType: fsType},
		AccessibleTopology: []*csi.Topology{nodeTopology(vol.ID.Node)},
	}}, nil
}

func nodeTopology(node string) *csi.Topology {
	return &csi.Topology{Segments: map[string]string{TopologyKey: node}}
}

// chooseFsType: the capability's fs_type wins, then the fsType parameter,
// then ext4. Block volumes carry none but keep the default in their context.
func chooseFsType(caps []*csi.VolumeCapability, param string) (string, error) {
	fs, err := capsFsType(caps)
	if err != nil || fs != "" {
		return fs, err
	}
	if param != "" {
		return param, nil
	}
	return defaultFsType, nil
}

// chooseNode returns the preferred node of the requirements, "" when none
// is named. Which nodes the backend can carve on is the backend's business.
func chooseNode(req *csi.TopologyRequirement) (string, error) {
	for _, list := range [][]*csi.Topology{req.GetPreferred(), req.GetRequisite()} {
		for _, t := range list {
			if n := t.GetSegments()[TopologyKey]; n != "" {
				return n, nil
			}
		}
	}
	return "", nil
}

// sizeRange applies CSI's capacity range rules: no size asked means the
// default (within the limit), and xfs volumes are carved big enough for
// mkfs.xfs when the limit allows.
func sizeRange(r *csi.CapacityRange, fsType string) (required, limit int64, err error) {
	required, limit = r.GetRequiredBytes(), r.GetLimitBytes()
	if required < 0 || limit < 0 {
		return 0, 0, invalidArgument("capacity range [%d, %d]: negative size", required, limit)
	}
	if limit > 0 && required > limit {
		return 0, 0, invalidArgument("capacity range: required %d above limit %d", required, limit)
	}
	if required == 0 {
		required = DefaultVolumeSize
		if limit > 0 && limit < required {
			required = limit
		}
	}
	if fsType == "xfs" && required < minXFSSize && (limit == 0 || limit >= minXFSSize) {
		required = minXFSSize
	}
	return required, limit, nil
}

func (c *Controller) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	id, err := lvmvol.ParseID(req.GetVolumeId())
	if err != nil {
		// Not an ID Carve could have made: nothing of ours to delete.
		klog.InfoS("DeleteVolume of a foreign volume id: nothing to do", "volumeId", req.GetVolumeId())
		return &csi.DeleteVolumeResponse{}, nil
	}
	if err := c.backend.DeleteVolume(ctx, id); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeResponse{}, nil
}
