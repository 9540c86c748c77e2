package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/crypt"
	"carve.dev/carve/driver/mapper"
	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// checkPath refuses a path the CO could not have meant (nodepath: not
// absolute, not clean, control characters, outside the CO's directory):
// INVALID_ARGUMENT, through volume.ErrInvalidPath.
func (n *Node) checkPath(what, path string) error {
	if err := n.cfg.PathRoot.Check(path); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// checkMountPath checks a path Carve is about to mount on (and create if
// missing): checkPath, then on the host no symlink at it, its parent there
// and inside the root (nodepath.Root.Resolve), and the parent not inside
// the filesystem of a Carve volume: creating the path or mounting over a
// directory there would change, or hide, that volume's data.
func (n *Node) checkMountPath(ctx context.Context, what, path string) error {
	if err := n.checkPath(what, path); err != nil {
		return err
	}
	if _, err := n.cfg.PathRoot.Resolve(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s: %w", volume.ErrUnsafeTarget, what, err)
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	vol, inside, err := n.insideVolume(ctx, filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if inside {
		return fmt.Errorf("%w: %s %s lies inside volume %s", volume.ErrUnsafeTarget, what, path, vol)
	}
	return nil
}

// insideVolume tells whether dir lies in the filesystem of a Carve volume
// of this node: the mount holding it is on a device-mapper device named
// after an LV of a served VG (or its dm-crypt mapping or linear layer),
// and that LV is a Carve volume. Carve mounts volumes only strictly inside the root, so a
// holder mounted at the root or above is none of them; that spares asking
// LVM on a host whose kubelet directory lies on an LV of a served VG.
func (n *Node) insideVolume(ctx context.Context, dir string) (volume.ID, bool, error) {
	holder, err := nodefs.Holder(dir)
	if err != nil {
		return volume.ID{}, false, err
	}
	if !n.cfg.PathRoot.Contains(holder.Point) {
		return volume.ID{}, false, nil
	}
	name, err := nodefs.DMName(holder.Device())
	if err != nil || name == "" {
		return volume.ID{}, false, err
	}
	vg, lv, ok := crypt.VolumeOf(name) // an encrypted volume's filesystem
	if !ok {
		vg, lv, ok = mapper.VolumeOf(name, mapper.LinearLayer) // a layer's
	}
	if !ok {
		var layer string
		vg, lv, layer, ok = lvm.SplitDMName(name)
		if !ok || layer != "" {
			return volume.ID{}, false, nil
		}
	}
	id := volume.ID{Node: n.cfg.NodeID, VG: vg, LV: lv}
	_, err = n.volumes.GetVolume(ctx, lvm.Fresh, id)
	switch {
	case err == nil:
		return id, true, nil
	case errors.Is(err, volume.ErrVolumeNotFound) || errors.Is(err, volume.ErrNotManaged):
		return volume.ID{}, false, nil
	}
	return volume.ID{}, false, fmt.Errorf("is %s inside volume %s? %w", dir, id, err)
}

// checkDistinct refuses a target that is the staging path or lies inside
// it, or holds it: a bind of a filesystem into itself, or over the mount it
// comes from, is no publish.
func checkDistinct(staging, target string) error {
	if staging == target || strings.HasPrefix(target, staging+"/") || strings.HasPrefix(staging, target+"/") {
		return invalidArgument("target path %s and staging path %s overlap", target, staging)
	}
	return nil
}

// checkUnmountPath is the first step of an unstage or unpublish: the ID can
// name a volume here (localID), the path is one the CO could mean
// (checkPath) and, on the host, no symlink and inside the root. gone is
// true when nothing is at the path: the call was done already, and
// succeeds, whatever became of the volume since.
func (n *Node) checkUnmountPath(volumeID, what, path string) (gone bool, err error) {
	if _, err := n.localID(volumeID); err != nil {
		return false, err
	}
	if err := n.checkPath(what, path); err != nil {
		return false, err
	}
	exists, err := n.cfg.PathRoot.Resolve(path)
	if !exists && (err == nil || errors.Is(err, fs.ErrNotExist)) {
		klog.V(4).InfoS("Nothing at the path: done already", "volumeId", volumeID, "path", path)
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	return false, nil
}
