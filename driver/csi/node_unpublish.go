package csi

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
)

// NodeUnpublishVolume unmounts the target path and removes what Carve made
// there; a target that does not exist is unpublished already. A mount at
// the target must be this volume's (its filesystem, or its device node):
// another volume's publish is never undone for it. A target that is no
// mount is removed only if it is what Carve creates, an empty directory or
// an empty file; so a retry after the volume was deleted still succeeds,
// and nothing else is ever removed.
func (n *Node) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, invalidArgument("target path missing")
	}
	gone, err := n.checkUnmountPath(req.GetVolumeId(), "target path", target)
	if err != nil || gone {
		return &csi.NodeUnpublishVolumeResponse{}, err
	}
	if err := n.checkOwnMount(ctx, req.GetVolumeId(), target, true); err != nil {
		return nil, err
	}
	if err := n.fs.Unmount(target); err != nil {
		return nil, err
	}
	klog.InfoS("Unpublished volume", "volumeId", req.GetVolumeId(), "target", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// checkOwnMount checks, before an unmount, that a mount at path is this
// volume's: the whole filesystem on its device, or, when deviceNode, its
// device node bound into place. A path that is no mount point passes:
// nothing will be unmounted, and only what Carve makes there will be
// removed (nodefs.Unmount). The volume is looked up only for a mount: a
// mounted volume is active and cannot have been deleted, so failing to
// find it means the mount is not its.
func (n *Node) checkOwnMount(ctx context.Context, volumeID, path string, deviceNode bool) error {
	mounted, err := n.fs.IsMountPoint(path)
	if err != nil || !mounted {
		return err
	}
	dev, err := n.resolveStaged(ctx, volumeID)
	if err != nil {
		// %v: the mount, not the volume, is what the caller got wrong.
		return fmt.Errorf("%w: %s is a mount point, but not of volume %s: %v", volume.ErrFailedPrecondition, path, volumeID, err) //nolint:errorlint // see above
	}
	if ok, err := nodefs.FilesystemOf(path, dev.Rdev); err != nil || ok {
		return err
	}
	if ok, err := nodefs.DeviceNodeOf(path, dev.Rdev); deviceNode && (err != nil || ok) {
		return err
	}
	return fmt.Errorf("%w: %s is a mount of something other than volume %s", volume.ErrFailedPrecondition, path, dev.ID)
}
