package backend

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/nodeloss"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// change checks the volume's resource, applies edit to its spec (a merge
// patch, so that concurrent status updates of the agent are not lost) and
// waits for done.
func (b *Backend) change(ctx context.Context, id volume.ID, check func(*v1alpha1.LogicalVolume) error,
	edit func(*v1alpha1.LogicalVolumeSpec) bool, done func(*v1alpha1.LogicalVolume) bool) (volume.Volume, error) {
	lv, err := b.lookup(ctx, id)
	if err != nil {
		return volume.Volume{}, err
	}
	if err := check(lv); err != nil {
		return volume.Volume{}, err
	}
	before := lv.DeepCopy()
	if edit(&lv.Spec) {
		// The patch returns the resource with the generation it made.
		if err := b.Client.Patch(ctx, lv, client.MergeFrom(before)); err != nil {
			return volume.Volume{}, fmt.Errorf("update %s: %w", lv.Name, err)
		}
	}
	return b.waitVolume(ctx, lv.Name, lv.Generation, done)
}

// PublishVolume is the attach: the agent of the volume's node activates
// the LV. A volume lives on one node; any other node is refused.
func (b *Backend) PublishVolume(ctx context.Context, id volume.ID, node string) (string, error) {
	if node != id.Node {
		return "", fmt.Errorf("volume %s lives on node %s and cannot be attached to %s: %w", id, id.Node, node, volume.ErrNodeNotFound)
	}
	// From the cache: no API request for the common case. One that lags
	// behind a new resource makes adoptRecord find it there (AlreadyExists:
	// nothing changes), and dropUnadopted drops only adopted resources.
	adopting := false
	switch lv, err := lookupIn(ctx, b.Cache, id); {
	case errors.Is(err, volume.ErrVolumeNotFound):
		if err := b.adoptRecord(ctx, id); err != nil {
			return "", err
		}
		adopting = true
	case err == nil && lv.Spec.Adopted && !lv.DeletionTimestamp.IsZero():
		return "", status.Errorf(codes.Aborted, "the failed adoption of %s is being dropped; a retry adopts it afresh", id)
	}
	var vol volume.Volume
	lv, err := b.recordPublished(ctx, id, node)
	if err == nil {
		vol, err = b.waitVolume(ctx, lv.Name, lv.Generation, func(lv *v1alpha1.LogicalVolume) bool { return lv.Status.Published })
	}
	if err != nil && adopting {
		b.dropUnadopted(context.WithoutCancel(ctx), id)
	}
	return vol.DevicePath, err
}

// UnpublishVolume is the detach: the agent deactivates the LV once the
// node has let go of it. A volume that is gone is detached.
func (b *Backend) UnpublishVolume(ctx context.Context, id volume.ID, node string) error {
	if node != "" && node != id.Node {
		return nil
	}
	lost, err := nodeloss.Lost(ctx, b.Cache, id.Node)
	if err != nil {
		return err
	}
	if lost {
		return b.unpublishLost(ctx, id)
	}
	_, err = b.change(ctx, id, anyVolume,
		func(s *v1alpha1.LogicalVolumeSpec) bool {
			changed := s.PublishedNode != ""
			s.PublishedNode = ""
			return changed
		},
		func(lv *v1alpha1.LogicalVolume) bool { return !lv.Status.Published })
	if errors.Is(err, volume.ErrVolumeNotFound) {
		return nil
	}
	return err
}

// unpublishLost detaches a volume of a node declared lost (nodeloss): the
// spec no longer publishes it, and nothing is waited for. Its agent is not
// coming back to deactivate the LV, and nothing can use the LV: the node is
// gone. Should the node return after all, its agent deactivates the LV as
// the spec says.
func (b *Backend) unpublishLost(ctx context.Context, id volume.ID) error {
	lv, err := b.lookup(ctx, id)
	if errors.Is(err, volume.ErrVolumeNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if lv.Spec.PublishedNode == "" {
		return nil
	}
	before := lv.DeepCopy()
	lv.Spec.PublishedNode = ""
	if err := b.Client.Patch(ctx, lv, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("update %s: %w", lv.Name, err)
	}
	klog.InfoS("Detached a volume of a lost node without its agent", "volume", id, "node", id.Node)
	return nil
}

// ExpandVolume raises the volume's required size and waits for the LV to
// reach it. Shrinking is refused here, before the resource changes
// (volume.CheckNoShrink, as standalone mode does).
func (b *Backend) ExpandVolume(ctx context.Context, id volume.ID, requiredBytes, limitBytes int64) (volume.Volume, error) {
	noShrink := func(lv *v1alpha1.LogicalVolume) error {
		return volume.CheckNoShrink(id, uint64(max(lv.Status.SizeBytes, 0)), limitBytes)
	}
	return b.change(ctx, id, noShrink,
		func(s *v1alpha1.LogicalVolumeSpec) bool {
			grow := requiredBytes > s.RequiredBytes
			if grow {
				s.RequiredBytes = requiredBytes
			}
			return grow
		},
		func(lv *v1alpha1.LogicalVolume) bool { return lv.Status.SizeBytes >= requiredBytes })
}

// anyVolume, as change's check, accepts every volume.
func anyVolume(*v1alpha1.LogicalVolume) error { return nil }

func sortVolumes(vs []volume.Volume) {
	volume.SortByID(vs, func(v volume.Volume) volume.ID { return v.ID })
}

// ModifyVolume writes the mutable parameters into the volume's spec
// (spec.type.mirrors, spec.ioLimits) and waits for the agent to bring the
// LV there (status.mirrors, status.ioLimits), as ExpandVolume waits for
// the size. What a volume's type cannot take is refused here, before the
// resource changes, as standalone mode refuses it (thin and striped
// volumes take no legs); what the node cannot place or apply the agent
// reports, and the wait returns its code. An empty change only looks the
// volume up.
func (b *Backend) ModifyVolume(ctx context.Context, id volume.ID, m volume.Mutable) (volume.Volume, error) {
	if m.IsZero() {
		return b.GetVolume(ctx, lvm.Fresh, id)
	}
	fits := func(lv *v1alpha1.LogicalVolume) error {
		if m.Mirrors != nil && *m.Mirrors > 0 && (lv.Spec.Type.ThinPool != "" || lv.Spec.Type.Stripes > 1) {
			return fmt.Errorf("%w: volume %s is thin, striped or raid5/6/10 and cannot have raid1 legs (mirrors=%d); only thick linear and raid1 volumes can",
				volume.ErrInvalidArgument, id, *m.Mirrors)
		}
		if m.Mirrors != nil && lv.Spec.Type.Integrity && *m.Mirrors == 0 {
			return fmt.Errorf("%w: volume %s is raid1 with integrity (raidIntegrity) and cannot turn linear (mirrors=0); it may change its legs from 1 up",
				volume.ErrInvalidArgument, id)
		}
		return cacheFits(lv, m)
	}
	return b.change(ctx, id, fits,
		func(s *v1alpha1.LogicalVolumeSpec) bool {
			before := *s
			if m.Mirrors != nil {
				s.Type.Mirrors = *m.Mirrors
			}
			s.IOLimits = v1alpha1.LimitsOf(m.Limits(s.IOLimits.Volume()))
			if m.WriteCache != nil {
				s.WriteCache = v1alpha1.WriteCacheOf(m.WriteCache)
			}
			return s.Type != before.Type || s.IOLimits != before.IOLimits || !s.WriteCache.Same(before.WriteCache)
		},
		func(lv *v1alpha1.LogicalVolume) bool {
			return lv.Status.VolumeID != "" && lv.Status.Mirrors == lv.Spec.Type.Mirrors && lv.Status.IOLimits == lv.Spec.IOLimits &&
				lv.Status.WriteCache.Same(lv.Spec.WriteCache)
		})
}

// cacheFits refuses, before the resource changes, the write cache the
// volume's type cannot take (volume.Type.CanCache, as standalone mode),
// with the legs m leaves it: so legs for a volume that keeps a cache too.
func cacheFits(lv *v1alpha1.LogicalVolume, m volume.Mutable) error {
	t, cached := volume.Type{ThinPool: lv.Spec.Type.ThinPool, Mirrors: lv.Spec.Type.Mirrors, RAID: lv.Spec.Type.RAID}, lv.Spec.WriteCache != nil
	if m.Mirrors != nil {
		t.Mirrors = *m.Mirrors
	}
	if m.WriteCache != nil {
		cached = m.WriteCache.Size > 0
	}
	if !cached {
		return nil
	}
	return t.CanCache()
}
