package driver

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	"k8s.io/mount-utils"
)

// NodePublishVolume bind-mounts the staged filesystem (or, for a block
// volume, the device file) at the pod's target path.
func (n *Node) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := checkPublishRequest(req); err != nil {
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
	vc := req.GetVolumeCapability()
	source := device
	var options []string
	if vc.GetMount() != nil {
		source = req.GetStagingTargetPath()
		options = vc.GetMount().GetMountFlags()
		if staged, err := n.fs.IsMountPoint(source); err != nil || !staged {
			return nil, fmt.Errorf("%w: volume %s is not staged at %s", errFailedPrecondition, id, source)
		}
	}
	if vc.GetAccessMode().GetMode() == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER {
		if err := checkSingleWriter(device, req.GetStagingTargetPath(), req.GetTargetPath()); err != nil {
			return nil, err
		}
	}
	readOnly := req.GetReadonly() || readOnlyMode(vc)
	if err := n.fs.BindMount(source, req.GetTargetPath(), readOnly, options); err != nil {
		return nil, err
	}
	klog.InfoS("Published volume", "volume", id, "target", req.GetTargetPath(), "readOnly", readOnly, "capability", describeCap(vc))
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
	return checkCapability(req.GetVolumeCapability())
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
			return fmt.Errorf("%w: single-writer volume is already published at %s", errFailedPrecondition, m)
		}
	}
	return nil
}

// targetsOf lists the mount points that expose device: mounts of its
// filesystem (same device number in mountinfo) and bind mounts of the device
// file itself. The latter show as devtmpfs mounts whose node may be named
// dm-N or mapper/vg-lv, so they are matched by the device number of the
// mounted file, not by name.
func targetsOf(device string) ([]string, error) {
	var st unix.Stat_t
	if err := unix.Stat(device, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", device, err)
	}
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	major, minor := int(unix.Major(st.Rdev)), int(unix.Minor(st.Rdev))
	var out []string
	for _, mi := range infos {
		if (mi.Major == major && mi.Minor == minor) || (mi.FsType == "devtmpfs" && isDevice(mi.MountPoint, st.Rdev)) {
			out = append(out, mi.MountPoint)
		}
	}
	return out, nil
}

// isDevice tells whether path is a device node of rdev.
func isDevice(path string, rdev uint64) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == rdev
}

// NodeUnpublishVolume unmounts and removes the target path; a target that
// does not exist is unpublished already.
func (n *Node) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	if req.GetTargetPath() == "" {
		return nil, invalidArgument("target path missing")
	}
	if err := n.fs.Unmount(req.GetTargetPath()); err != nil {
		return nil, err
	}
	klog.InfoS("Unpublished volume", "volumeId", req.GetVolumeId(), "target", req.GetTargetPath())
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
