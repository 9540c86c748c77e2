package csi

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"carve.dev/carve/driver/mapper"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// volumeDevice is a Carve volume of this node and the device node that was
// checked to hold its data: its LV's, or the device its filesystem lives
// on above that LV (dataDevice).
type volumeDevice struct {
	volume.Volume
	Path string // the device node, /dev/VG/LV or /dev/mapper/NAME
	Rdev uint64 // its device number
	// LVPath and LVRdev are the LV's device node and number: Path and
	// Rdev, but for a volume with a device above its LV.
	LVPath string
	LVRdev uint64
}

// resolveDevice is resolveLV and the device that holds its filesystem
// (dataDevice): what publish, unpublish, unstage, expansion and stats look
// for at a path.
func (n *Node) resolveDevice(ctx context.Context, r lvm.Reads, volumeID string) (volumeDevice, error) {
	dev, err := n.resolveLV(ctx, r, volumeID)
	if err != nil {
		return dev, err
	}
	return dataDevice(dev)
}

// dataDevice is dev with the device above its LV that its filesystem lives
// on: an encrypted volume's open mapping (openedDevice: one whose mapping
// is not open is not staged, FAILED_PRECONDITION), else its linear layer
// when there is one over the LV (mapper.Linear), else the LV itself (a
// block volume, or a filesystem staged before Carve made layers). A device
// of the layer's name that is not over the LV is refused.
func dataDevice(dev volumeDevice) (volumeDevice, error) {
	if dev.Encrypted {
		return openedDevice(dev)
	}
	layer, found, err := mapper.FindLinear(dev.ID.VG, dev.ID.LV, dev.LVRdev)
	if err != nil || !found {
		return dev, err
	}
	dev.Path, dev.Rdev = layer.Path, layer.Rdev
	return dev, nil
}

// resolveLV turns a volume ID into its LV's device. Every node call that
// formats, mounts, grows or measures a volume gets its device here and
// nowhere else, so that a wrong ID (hand-written, stale, another driver's)
// is refused before anything on the node changes:
//
//   - the ID names a volume of this node with names lvm accepts (localID);
//   - the VG is one this node serves, and the LV exists, is not internal,
//     is not a snapshot, carries Carve's volume tag and is neither half
//     created nor being deleted (GetVolume): NOT_FOUND otherwise, for a
//     node cannot tell a missing volume from someone else's LV;
//   - the LV is active, i.e. published to this node (FAILED_PRECONDITION
//     otherwise), and the device node /dev/VG/LV has the device number lvm
//     reports for the LV: no symlink, stale node or name trick can lead to
//     another device (FAILED_PRECONDITION).
//
// nodefs still checks that a device is blank before mkfs: a second guard.
func (n *Node) resolveLV(ctx context.Context, r lvm.Reads, volumeID string) (volumeDevice, error) {
	id, err := n.localID(volumeID)
	if err != nil {
		return volumeDevice{}, err
	}
	vol, err := n.volumes.GetVolume(ctx, r, id)
	if errors.Is(err, volume.ErrNotManaged) {
		// An LV without Carve's tag is no volume of Carve's at all.
		return volumeDevice{}, fmt.Errorf("%w: %w", volume.ErrNotFound, err)
	}
	if err != nil {
		return volumeDevice{}, err
	}
	if !vol.Published || vol.KernelMajor < 0 || vol.KernelMinor < 0 {
		return volumeDevice{}, fmt.Errorf("%w: volume %s is not published to this node (its LV is not active)",
			volume.ErrFailedPrecondition, id)
	}
	rdev, err := n.waitForDevice(ctx, vol.DevicePath)
	if err != nil {
		return volumeDevice{}, err
	}
	lvDev := unix.Mkdev(uint32(vol.KernelMajor), uint32(vol.KernelMinor))
	if rdev != lvDev {
		return volumeDevice{}, fmt.Errorf("%w: %s is device %d:%d, but lvm says LV %s/%s is %d:%d; refusing to use it",
			volume.ErrFailedPrecondition, vol.DevicePath, unix.Major(rdev), unix.Minor(rdev), id.VG, id.LV, vol.KernelMajor, vol.KernelMinor)
	}
	return volumeDevice{Volume: vol, Path: vol.DevicePath, Rdev: rdev, LVPath: vol.DevicePath, LVRdev: rdev}, nil
}

// resolveStaged is resolveDevice for the node calls that follow
// NodeStageVolume and only bind or unmount what it mounted
// (NodePublishVolume, NodeUnpublishVolume, NodeUnstageVolume): LVM may
// answer from a recent report (lvm.Cached), usually the one
// NodeStageVolume read (lvm.Shared), as NodeGetVolumeStats does.
// That is safe for the same reason: the device number from the report
// must still match the device node the kernel shows, and the mount they
// bind or unmount must be of that device (checkStaged, checkOwnMount), so
// a report stale by a change made outside Carve can only refuse, never
// lead to another device. A refusal is checked again on a fresh read, so
// that a stale report cannot hold a call up for the cache's max age.
func (n *Node) resolveStaged(ctx context.Context, volumeID string) (volumeDevice, error) {
	if dev, err := n.resolveDevice(ctx, lvm.Cached, volumeID); err == nil {
		return dev, nil
	}
	return n.resolveDevice(ctx, lvm.Fresh, volumeID)
}

// waitForDevice waits (DeviceWait) for the device node of an active LV:
// udev or lvm may still be creating it.
func (n *Node) waitForDevice(ctx context.Context, path string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.DeviceWait)
	defer cancel()
	rdev, err := n.waitDevice(ctx, path)
	if err != nil {
		return 0, fmt.Errorf("%w: device %s did not appear: %w", volume.ErrFailedPrecondition, path, err)
	}
	return rdev, nil
}
