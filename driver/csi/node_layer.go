package csi

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/mapper"
	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// The linear layer (driver/mapper): the filesystem of a volume that is not
// encrypted is staged on a device-mapper linear device over the whole LV,
// which a snapshot suspends to hold the filesystem's I/O at one instant.
// NodeStage makes it (one dmsetup create), NodeUnstage removes it once its
// filesystem is unmounted; the filesystem's bytes are the LV's, so either
// step can be cut and retried:
//
//	crash after the layer was made, before the mount → the retry finds
//	    it over the LV and uses it; a volume never staged again has it
//	    removed by ControllerUnpublish (lvmvol.Manager.removeIdleLayer),
//	    which it would otherwise hold open;
//	crash after the unmount, before the removal → the retry finds the
//	    staging path gone and still removes the layer.

// layerForStage is dev with its layer as the data device, made if there is
// none. A staging path already mounted from the LV itself (staged by a
// Carve that made no layers) stays so: the retry of that stage succeeds.
func (n *Node) layerForStage(ctx context.Context, dev volumeDevice, staging string) (volumeDevice, error) {
	if n.layers == nil {
		return dev, nil
	}
	if onLV, err := nodefs.FilesystemOf(staging, dev.LVRdev); err != nil || onLV {
		return dev, err
	}
	layer, err := n.layers.Ensure(ctx, dev.ID.VG, dev.ID.LV, dev.LVRdev)
	if err != nil {
		return volumeDevice{}, fmt.Errorf("volume %s: %w", dev.ID, err)
	}
	dev.Path, dev.Rdev = layer.Path, layer.Rdev
	return dev, nil
}

// dropUnusedLayer removes the layer a failed stage made or found, unless
// something holds it open (the kernel refuses then): a stage that failed
// is not unstaged, and the layer would hold the LV open.
func (n *Node) dropUnusedLayer(ctx context.Context, dev volumeDevice) {
	if n.layers == nil || dev.Path == dev.LVPath || dev.Encrypted {
		return
	}
	if err := n.layers.Remove(ctx, dev.ID.VG, dev.ID.LV, dev.LVRdev); err != nil {
		klog.InfoS("Left the layer of a failed stage", "volume", dev.ID, "err", err)
	}
}

// removeLayer removes the volume's layer, if it has one: NodeUnstage's
// last step, also when the staging path was gone already. Only a layer of
// Carve's over this volume's LV is removed. The LV's device number may
// come from a recent report (lvm.Cached), as resolveStaged's
// does: the layer must map that very device, so a stale report can only
// refuse, and a refusal is checked again on a fresh read.
func (n *Node) removeLayer(ctx context.Context, id volume.ID) error {
	if n.layers == nil {
		return nil
	}
	name, err := mapper.Name(id.VG, id.LV, mapper.LinearLayer)
	if err != nil {
		return nil // names too long for a layer: no volume of them has one
	}
	if _, err := nodefs.DeviceNumber(mapper.Path(name)); err != nil {
		return nil // none there
	}
	if err := n.removeLayerOf(ctx, lvm.Cached, id, name); err == nil {
		return nil
	}
	return n.removeLayerOf(ctx, lvm.Fresh, id, name)
}

// removeLayerOf removes layer name of volume id, read as r says.
func (n *Node) removeLayerOf(ctx context.Context, r lvm.Reads, id volume.ID, name string) error {
	vol, err := n.volumes.GetVolume(ctx, r, id)
	if err != nil {
		return fmt.Errorf("layer %s is there, but its volume: %w", name, err)
	}
	return n.layers.Remove(ctx, id.VG, id.LV, unix.Mkdev(uint32(vol.KernelMajor), uint32(vol.KernelMinor)))
}

// growLayer grows a volume's layer to its LV's new size, before its
// filesystem grows.
func (n *Node) growLayer(ctx context.Context, dev volumeDevice) error {
	if n.layers == nil || dev.Path == dev.LVPath {
		return nil
	}
	_, err := n.layers.Ensure(ctx, dev.ID.VG, dev.ID.LV, dev.LVRdev)
	return err
}
