package lvmvol

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/mapper"
	"carve.dev/carve/lvm"
)

// Layers are the devices a node puts above its volumes' LVs for their
// filesystems (mapper.Linear): a snapshot holds a volume's I/O through its
// layer, and an unpublish removes a layer nothing uses any more.
type Layers interface {
	Find(vg, lv string, lvRdev uint64) (mapper.Device, bool, error)
	Suspend(ctx context.Context, d mapper.Device) error
	Resume(ctx context.Context, d mapper.Device) error
	Remove(ctx context.Context, vg, lv string, lvRdev uint64) error
	ResumeLeftovers(ctx context.Context) ([]string, error)
}

// maxFreeze bounds the lvm2 command run while volumes' I/O is held: a
// snapshot that cannot be made in that long fails (the CO tries again)
// rather than stall the volumes' writers.
const maxFreeze = 30 * time.Second

// snapshotLV is lvm2's snapshot of src (CreateSnapshotOf), made while
// src's layer, if it has one on this node, holds its I/O. lvm2 suspends
// the LV itself around a snapshot, with lockfs, but the filesystem is on
// the layer, not the LV: without the layer's own suspend (lockfs) the
// snapshot would hold the filesystem as a crash would leave it, its dirty
// pages not written.
func (m *Manager) snapshotLV(ctx context.Context, src lvm.LV, name string, o lvm.SnapshotOptions) (lvm.LV, error) {
	held, err := m.suspendLayers(ctx, []lvm.LV{src})
	if err != nil {
		return lvm.LV{}, err
	}
	defer held.resume(ctx)
	if len(held.devs) == 0 {
		return m.lvm.CreateSnapshotOf(ctx, src, name, o)
	}
	fctx, cancel := context.WithTimeout(ctx, maxFreeze)
	defer cancel()
	o.SuspendedLayers = true
	return m.lvm.CreateSnapshotOf(fctx, src, name, o)
}

// heldLayers are layers whose I/O a snapshot holds (suspendLayers).
type heldLayers struct {
	l    Layers
	devs []mapper.Device
	at   time.Time
}

// suspendLayers suspends the layers of those of lvs that have one on this
// node (active LVs only: an inactive one has no device to be under a
// layer), all or none: on a failure the ones suspended are resumed.
func (m *Manager) suspendLayers(ctx context.Context, lvs []lvm.LV) (heldLayers, error) {
	held := heldLayers{l: m.layers, at: time.Now()}
	if m.layers == nil {
		return held, nil
	}
	for _, lv := range lvs {
		if !lv.Active || lv.KernelMajor < 0 || lv.KernelMinor < 0 {
			continue
		}
		d, found, err := m.layers.Find(lv.VGName, lv.Name, unix.Mkdev(uint32(lv.KernelMajor), uint32(lv.KernelMinor)))
		if err == nil && found {
			err = m.layers.Suspend(ctx, d)
		}
		if err != nil {
			held.resume(ctx)
			return heldLayers{}, fmt.Errorf("hold the I/O of %s/%s for a snapshot: %w", lv.VGName, lv.Name, err)
		}
		if found {
			held.devs = append(held.devs, d)
		}
	}
	return held, nil
}

// resume resumes the held layers, even when ctx is done: a layer left
// suspended stalls its volume's writers (a carve killed here is resumed by
// ResumeSuspendedLayers at its next start). The window is logged.
func (h heldLayers) resume(ctx context.Context) {
	if len(h.devs) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	names := make([]string, 0, len(h.devs))
	for _, d := range h.devs {
		if err := h.l.Resume(ctx, d); err != nil {
			klog.ErrorS(err, "Could not resume a volume's layer after a snapshot: its I/O stays held", "layer", d.Name)
		}
		names = append(names, d.Name)
	}
	klog.InfoS("Held the volumes' I/O for a snapshot", "layers", names, "window", time.Since(h.at))
}

// removeIdleLayer removes lv's layer before the LV is deactivated, if one
// is left with nothing on it (a NodeStageVolume cut between making the
// layer and mounting it, never unstaged): it holds the LV open. A layer
// in use is volume.ErrInUse.
func (m *Manager) removeIdleLayer(ctx context.Context, lv lvm.LV) error {
	if m.layers == nil || lv.KernelMajor < 0 || lv.KernelMinor < 0 {
		return nil
	}
	return m.layers.Remove(ctx, lv.VGName, lv.Name, unix.Mkdev(uint32(lv.KernelMajor), uint32(lv.KernelMinor)))
}
