package csi

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/iolimit"
	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// IO limits (volume.IOLimits) are put on pods here, on the node: at each
// NodePublishVolume for the pod being published, and by ApplyLimits for
// every pod of the node using the volume when ModifyVolume changes them.
// The LV's tags are their one record (lvmvol.limitTags), read by each
// under the volume's limits lock (Node.limitLocks), from no report older
// than Carve's last change of them (see limitPublish): a publish
// reads, writes io.max and mounts under it, and a change writes the tags
// before ApplyLimits reads them and looks for mounts under it. So a
// publish either sees the new tags, or is done and mounted when
// ApplyLimits looks, which then finds it and writes the new limits over
// the old: no pod keeps limits older than the tags.

// limitPublish puts the volume's IO limits on the pod that target is
// kubelet's for, before that pod gets the volume: rdev is the device its
// IO will reach. A volume with limits whose pod Carve cannot find (a
// target path that is not a kubelet pod's, no per-pod cgroups, no cgroup
// hierarchy given) is FAILED_PRECONDITION: a limit the user asked for is
// never silently left off. A volume without limits clears any line a
// former publish into the same pod left.
//
// The limits may come from a recent report (lvm.Cached), usually
// the one NodeStageVolume read: they are tags only Carve writes, through
// the same lvm.Cache, which never answers from a report older than its
// last change, so a cached answer is what a fresh lvs would say. A fresh
// read cost every pod start one more lvs (docs/performance.md).
func (n *Node) limitPublish(ctx context.Context, id volume.ID, rdev uint64, target string) error {
	vol, err := n.volumes.GetVolume(ctx, lvm.Cached, id)
	if err != nil {
		return err
	}
	l := vol.Limits
	uid, ok := iolimit.PodOfTarget(n.cfg.PathRoot.Dir(), target)
	switch {
	case n.cfg.Cgroups == nil && !l.IsZero():
		return errNoCgroups(id)
	case n.cfg.Cgroups == nil:
		return nil
	case !ok && !l.IsZero():
		return fmt.Errorf("%w: volume %s has IO limits, and target path %s is not a kubelet pod's: no pod to limit",
			volume.ErrFailedPrecondition, id, target)
	case !ok:
		return nil
	}
	return n.limitPod(uid, rdev, l)
}

// errNoCgroups refuses volume id's limits on a node that applies none.
func errNoCgroups(id volume.ID) error {
	return fmt.Errorf("%w: volume %s has IO limits, and this node applies none (carve node runs without --cgroup-root)",
		volume.ErrFailedPrecondition, id)
}

// limitPod writes l for rdev into pod uid's cgroup.
func (n *Node) limitPod(uid string, rdev uint64, l volume.IOLimits) error {
	dir, err := n.cfg.Cgroups.PodDir(uid)
	if errors.Is(err, iolimit.ErrNoPodCgroup) && l.IsZero() {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: IO limits of pod %s: %w", volume.ErrFailedPrecondition, uid, err)
	}
	if err := iolimit.Set(dir, rdev, l); err != nil {
		if l.IsZero() {
			klog.InfoS("No IO limits to clear", "pod", uid, "err", err)
			return nil
		}
		return fmt.Errorf("%w: IO limits of pod %s: %w", volume.ErrFailedPrecondition, uid, err)
	}
	klog.V(2).InfoS("IO limits set", "pod", uid, "cgroup", dir, "line", iolimit.Line(rdev, l))
	return nil
}

// ApplyLimits puts the volume's IO limits, as its LV records them now, on
// every pod of this node that has it published (ModifyVolume's
// lvmvol.LimitsApplier): each kubelet target path mounted from its device
// names its pod. A volume not published here, or not staged, has no pod.
func (n *Node) ApplyLimits(ctx context.Context, id volume.ID) error {
	release, err := n.limitLocks.Lock(ctx, id.String())
	if err != nil {
		return fmt.Errorf("IO limits of %s: %w", id, err)
	}
	defer release()
	dev, err := n.resolveDevice(ctx, lvm.Fresh, id.String())
	if errors.Is(err, volume.ErrFailedPrecondition) {
		klog.V(2).InfoS("IO limits: the volume is on no pod of this node", "volume", id, "reason", err)
		return nil
	}
	if err != nil {
		return err
	}
	mounts, err := nodefs.MountsOf(dev.Rdev)
	if err != nil {
		return err
	}
	if n.cfg.Cgroups == nil && !dev.Limits.IsZero() {
		return errNoCgroups(id)
	}
	var errs []error
	for _, m := range mounts {
		uid, ok := iolimit.PodOfTarget(n.cfg.PathRoot.Dir(), m)
		if !ok || n.cfg.Cgroups == nil {
			continue // a staging path, or not a pod's
		}
		if err := n.limitPod(uid, dev.Rdev, dev.Limits); err != nil {
			errs = append(errs, err)
			continue
		}
		klog.InfoS("IO limits applied", "volume", id, "pod", uid, "limits", dev.Limits)
	}
	return errors.Join(errs...)
}
