package csi

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
)

// NodePublishVolume bind-mounts the staged filesystem (or, for a block
// volume, the device file) at the pod's target path. The staging path must
// be a mount of this volume's filesystem: a path that is merely a mount
// point (the host's /, another volume's staging) is never exposed.
func (n *Node) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := checkPublishRequest(req); err != nil {
		return nil, err
	}
	dev, err := n.resolveStaged(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	staging, target := req.GetStagingTargetPath(), req.GetTargetPath()
	if err := n.checkPublishPaths(ctx, staging, target); err != nil {
		return nil, err
	}
	vc := req.GetVolumeCapability()
	if dev.Encrypted && vc.GetBlock() != nil {
		return nil, fmt.Errorf("%w: volume %s is encrypted: it is published as a filesystem only, never as its raw device",
			volume.ErrFailedPrecondition, dev.ID)
	}
	source := dev.Path
	var options []string
	if vc.GetMount() != nil {
		source, options = staging, vc.GetMount().GetMountFlags()
		if err := n.checkStaged(dev, staging); err != nil {
			return nil, err
		}
	}
	if vc.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER {
		if err := checkSingleWriter(dev.Path, staging, target); err != nil {
			return nil, err
		}
	}
	readOnly := req.GetReadonly() || readOnlyMode(vc)
	release, err := n.limitLocks.Lock(ctx, dev.ID.String())
	if err != nil {
		return nil, err
	}
	defer release()
	if err := n.limitPublish(ctx, dev.ID, dev.Rdev, target); err != nil {
		return nil, err
	}
	if err := n.fs.BindMount(source, target, readOnly, options); err != nil {
		return nil, err
	}
	klog.InfoS("Published volume", "volume", dev.ID, "target", target, "readOnly", readOnly, "capability", describeCap(vc))
	return &csi.NodePublishVolumeResponse{}, nil
}

func checkPublishRequest(req *csi.NodePublishVolumeRequest) error {
	switch {
	case req.GetVolumeId() == "":
		return invalidArgument("volume id missing")
	case req.GetTargetPath() == "":
		return invalidArgument("target path missing")
	case req.GetStagingTargetPath() == "":
		return invalidArgument("staging target path missing (this driver stages volumes)")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return err
	}
	mnt := req.GetVolumeCapability().GetMount()
	if (req.GetReadonly() || readOnlyMode(req.GetVolumeCapability())) && slices.Contains(mnt.GetMountFlags(), "rw") {
		return invalidArgument("mount flag rw asked for a read-only publish")
	}
	return nodefs.CheckMountFlags(requestFsType(mnt, req.GetVolumeContext()), mnt.GetMountFlags())
}

// checkPublishPaths: both paths are the CO's (checkPath), apart, and the
// target is fit to mount on (checkMountPath).
func (n *Node) checkPublishPaths(ctx context.Context, staging, target string) error {
	if err := n.checkPath("staging target path", staging); err != nil {
		return err
	}
	if err := checkDistinct(staging, target); err != nil {
		return err
	}
	return n.checkMountPath(ctx, "target path", target)
}

// checkStaged: the staging path is a mount of the volume's whole
// filesystem, reached without a symlink. Nothing else is bound into a pod.
func (n *Node) checkStaged(dev volumeDevice, staging string) error {
	if _, err := n.cfg.PathRoot.Resolve(staging); err != nil {
		return fmt.Errorf("staging target path: %w", err)
	}
	staged, err := nodefs.FilesystemOf(staging, dev.Rdev)
	if err != nil {
		return err
	}
	if !staged {
		return fmt.Errorf("%w: volume %s is not staged at %s (no mount of its filesystem there)", volume.ErrFailedPrecondition, dev.ID, staging)
	}
	return nil
}

// checkSingleWriter refuses a second target for a SINGLE_NODE_SINGLE_WRITER
// volume: only one pod may have it.
func checkSingleWriter(device, staging, target string) error {
	mounts, err := targetsOf(device)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if m != filepath.Clean(staging) && m != filepath.Clean(target) {
			return fmt.Errorf("%w: single-writer volume is already published at %s", volume.ErrFailedPrecondition, m)
		}
	}
	return nil
}

// targetsOf lists the mount points that expose device (nodefs.MountsOf).
func targetsOf(device string) ([]string, error) {
	rdev, err := nodefs.DeviceNumber(device)
	if err != nil {
		return nil, err
	}
	return nodefs.MountsOf(rdev)
}
