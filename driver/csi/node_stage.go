package csi

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// NodeStageVolume mounts the volume's filesystem at the staging path,
// formatting the device first only if it holds no filesystem at all. A
// block volume needs no staging: its device is bound straight into pods.
func (n *Node) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	staging := req.GetStagingTargetPath()
	if staging == "" {
		return nil, invalidArgument("staging target path missing")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	mnt := req.GetVolumeCapability().GetMount()
	fsType := requestFsType(mnt, req.GetVolumeContext())
	if err := nodefs.CheckMountFlags(fsType, mnt.GetMountFlags()); err != nil {
		return nil, err
	}
	// Read again here, not trusted for having passed CreateVolume: a
	// static PV's volume context is whatever its author wrote.
	mkfsOpts, err := mkfsOptions(fsType, req.GetVolumeContext())
	if err != nil {
		return nil, err
	}
	// Fresh facts, one report for all of them (the volume, its thin
	// pool), which the node calls that follow reuse (resolveStaged).
	dev, err := n.resolveLV(ctx, lvm.Shared(), req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := n.checkPath("staging target path", staging); err != nil {
		return nil, err
	}
	if err := n.checkEncryption(dev, req.GetVolumeContext(), mnt == nil); err != nil {
		return nil, err
	}
	if mnt == nil {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	if err := n.checkMountPath(ctx, "staging target path", staging); err != nil {
		return nil, err
	}
	if dev.Encrypted {
		dev, err = n.openForStage(ctx, dev, req.GetSecrets())
	} else {
		dev, err = n.layerForStage(ctx, dev, staging)
	}
	if err != nil {
		return nil, err
	}
	formatted, err := n.fs.FormatAndMount(ctx, dev.Path, staging, fsType, mkfsOpts, stageOptions(fsType, mnt.GetMountFlags()))
	if err != nil {
		n.dropUnusedLayer(ctx, dev)
		return nil, err
	}
	// A filesystem made just now fills its device: asking whether it
	// needs to grow would cost blockdev, blkid and, as mount-utils
	// judges a fresh xfs or ext4, a no-op resize (3-4 processes). One
	// that was there already may predate a growth of the LV.
	if !formatted {
		if err := n.growIfNeeded(ctx, dev.Path, staging); err != nil {
			return nil, err
		}
	}
	klog.InfoS("Staged volume", "volume", dev.ID, "device", dev.Path, "fsType", fsType, "path", staging)
	return &csi.NodeStageVolumeResponse{}, nil
}

// requestFsType is the filesystem a mount capability asks for: its own
// fs_type, else the volume's (its StorageClass's), else the default.
func requestFsType(mnt *csi.VolumeCapability_MountVolume, volumeContext map[string]string) string {
	for _, t := range []string{mnt.GetFsType(), volumeContext[ParamFsType]} {
		if t != "" {
			return t
		}
	}
	return volume.DefaultFSType
}

// NodeUnstageVolume unmounts the staging path; a path that does not exist
// is unstaged already. What is mounted there must be this volume's
// filesystem: another volume's staging mount is never unmounted for it.
// Once unmounted, an empty directory is removed; anything else at the path
// is not Carve's and is left alone (FAILED_PRECONDITION).
func (n *Node) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	staging := req.GetStagingTargetPath()
	if staging == "" {
		return nil, invalidArgument("staging target path missing")
	}
	gone, err := n.checkUnmountPath(req.GetVolumeId(), "staging target path", staging)
	if err != nil {
		return nil, err
	}
	if !gone {
		if err := n.checkOwnMount(ctx, req.GetVolumeId(), staging, false); err != nil {
			return nil, err
		}
		if err := n.fs.Unmount(staging); err != nil {
			return nil, err
		}
	}
	id, _ := n.localID(req.GetVolumeId()) // checked by checkUnmountPath
	if err := n.closeMapping(ctx, id); err != nil {
		return nil, err
	}
	if err := n.removeLayer(ctx, id); err != nil {
		return nil, err
	}
	klog.InfoS("Unstaged volume", "volumeId", req.GetVolumeId(), "path", staging)
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// checkEncryption: an encrypted volume (its LV's tag says so) is staged
// only as a filesystem, on a node that can open it; a volume context that
// says encrypted for an LV that is not is refused rather than formatted in
// plaintext.
func (n *Node) checkEncryption(dev volumeDevice, volumeContext map[string]string, block bool) error {
	switch {
	case !dev.Encrypted && volumeContext[ParamEncryption] == EncryptionLUKS2:
		return fmt.Errorf("%w: volume %s: its context says %s=%s, but its LV is not marked encrypted; not staging it in plaintext",
			volume.ErrFailedPrecondition, dev.ID, ParamEncryption, EncryptionLUKS2)
	case !dev.Encrypted:
		return nil
	case block:
		return fmt.Errorf("%w: volume %s is encrypted: it can be staged as a filesystem only, not as a raw block device",
			volume.ErrFailedPrecondition, dev.ID)
	case n.crypt == nil:
		return fmt.Errorf("%w: volume %s is encrypted, and this node is not set up to open it", volume.ErrFailedPrecondition, dev.ID)
	}
	return nil
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
