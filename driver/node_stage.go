package driver

import (
	"context"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"
)

// NodeStageVolume mounts the volume's filesystem at the staging path,
// formatting the device first only if it holds no filesystem at all. A
// block volume needs no staging: its device is bound straight into pods.
func (n *Node) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	if req.GetStagingTargetPath() == "" {
		return nil, invalidArgument("staging target path missing")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	id, err := n.localID(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	device, err := n.waitDevice(ctx, id)
	if err != nil {
		return nil, err
	}
	mnt := req.GetVolumeCapability().GetMount()
	if mnt == nil {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	fsType := mnt.GetFsType()
	if fsType == "" {
		fsType = req.GetVolumeContext()[ParamFsType]
	}
	if fsType == "" {
		fsType = defaultFsType
	}
	if err := n.fs.FormatAndMount(ctx, device, req.GetStagingTargetPath(), fsType, stageOptions(fsType, mnt.GetMountFlags())); err != nil {
		return nil, err
	}
	if err := n.growIfNeeded(ctx, device, req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	klog.InfoS("Staged volume", "volume", id, "device", device, "fsType", fsType, "path", req.GetStagingTargetPath())
	return &csi.NodeStageVolumeResponse{}, nil
}

// NodeUnstageVolume unmounts the staging path; a path that is not mounted or
// does not exist is unstaged already.
func (n *Node) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	if req.GetStagingTargetPath() == "" {
		return nil, invalidArgument("staging target path missing")
	}
	if err := n.fs.Unmount(req.GetStagingTargetPath()); err != nil {
		return nil, err
	}
	klog.InfoS("Unstaged volume", "volumeId", req.GetVolumeId(), "path", req.GetStagingTargetPath())
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// stageOptions adds what Carve's volumes need to the CO's mount flags: a
// clone or restore of an xfs volume carries its source's filesystem UUID,
// and all of them live on the same node, where XFS refuses a second mount
// of a UUID unless told nouuid.
func stageOptions(fsType string, flags []string) []string {
	if fsType == "xfs" && !slices.Contains(flags, "nouuid") {
		return append(slices.Clone(flags), "nouuid")
	}
	return flags
}
