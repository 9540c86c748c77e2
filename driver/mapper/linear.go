package mapper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
)

// Linear layer: every filesystem Carve stages on a volume that is not
// encrypted lives on a device-mapper linear device of Carve's over the
// volume's LV, mapping it whole (an encrypted one's filesystem lives on its
// dm-crypt mapping, which serves the same way). Why a layer:
//
// a group snapshot must hold the I/O of several filesystems at one instant
// while lvm2 snapshots their LVs, and lvm2 cannot do that itself (measured
// with lvm2 2.03.16 and kernel 6.1):
//   - a filesystem frozen beforehand (FIFREEZE) makes lvm2's own suspend
//     fail with EBUSY (one freeze holder before kernel 6.6);
//   - an LV suspended beforehand makes a thin snapshot skip the pool's
//     messages and wedge the pool.
//
// Suspending the layers (lockfs: each filesystem flushed and frozen) and
// then letting lvm2 snapshot the LVs below works for thin and COW alike;
// lvm2 never touches the layers. It must scan with
// devices/ignore_suspended_devices=1 meanwhile
// (lvm.SnapshotOptions.SuspendedLayers), or its scan reads a suspended
// layer and hangs in the kernel.
//
// The layer maps the whole LV, so its data is the LV's: removing it loses
// nothing, and a volume staged before Carve made layers keeps its
// filesystem on the LV (it then joins no group snapshot).
const LinearLayer = "carve"

// linearUUIDPrefix starts the device-mapper UUID of every linear layer:
// Lookup's proof that a device of a layer's name is Carve's.
const linearUUIDPrefix = "CARVE-LINEAR-"

// Control drives device-mapper devices by name: Kernel, or a fake in
// unit tests.
type Control interface {
	Create(ctx context.Context, name, uuid string, targets []Target) (uint64, error)
	Load(ctx context.Context, name string, targets []Target) error
	Suspend(ctx context.Context, name string) error
	Resume(ctx context.Context, name string) error
	Remove(ctx context.Context, name string, rdev uint64) error
}

// Linear makes, grows, suspends, resumes and removes linear layers.
type Linear struct{ dm Control }

// NewLinear returns a Linear that drives device-mapper through dm.
func NewLinear(dm Control) *Linear { return &Linear{dm: dm} }

// Find looks up vg/lv's layer (FindLinear).
func (l *Linear) Find(vg, lv string, lvRdev uint64) (Device, bool, error) {
	return FindLinear(vg, lv, lvRdev)
}

// FindLinear looks up vg/lv's layer; one that is there must map the LV
// numbered lvRdev (Device.Over). It reads /dev and sysfs only.
func FindLinear(vg, lv string, lvRdev uint64) (Device, bool, error) {
	name, err := Name(vg, lv, LinearLayer)
	if err != nil {
		return Device{}, false, err
	}
	d, found, err := Lookup(name, linearUUIDPrefix)
	if err != nil || !found {
		return d, false, err
	}
	return d, true, d.Over(lvRdev)
}

// Ensure makes vg/lv's layer over the LV numbered lvRdev, the LV's size.
// Idempotent: a layer there already is used, and reloaded to the LV's
// size if the LV grew since it was made (an expansion).
func (l *Linear) Ensure(ctx context.Context, vg, lv string, lvRdev uint64) (Device, error) {
	d, found, err := FindLinear(vg, lv, lvRdev)
	if err != nil {
		return Device{}, err
	}
	sectors, err := Sectors(lvRdev)
	if err != nil {
		return Device{}, fmt.Errorf("size of LV %s/%s: %w", vg, lv, err)
	}
	switch {
	case !found:
		if _, err := l.dm.Create(ctx, d.Name, LinearUUID(lvRdev), table(sectors, lvRdev)); err != nil {
			return Device{}, fmt.Errorf("make layer %s over LV %s/%s: %w", d.Name, vg, lv, err)
		}
		klog.InfoS("Made the volume's layer", "vg", vg, "lv", lv, "layer", d.Name, "sectors", sectors)
	case d.Sectors != sectors:
		if err := l.reload(ctx, d, sectors, lvRdev); err != nil {
			return Device{}, err
		}
	default:
		return d, nil
	}
	d, _, err = FindLinear(vg, lv, lvRdev)
	return d, err
}

// reload swaps the layer's table for one of the LV's new size; the resume
// makes it live (the kernel suspends and resumes the device around it).
func (l *Linear) reload(ctx context.Context, d Device, sectors, lvRdev uint64) error {
	if err := l.dm.Load(ctx, d.Name, table(sectors, lvRdev)); err != nil {
		return fmt.Errorf("grow layer %s: %w", d.Name, err)
	}
	if err := l.dm.Resume(ctx, d.Name); err != nil {
		return fmt.Errorf("grow layer %s: %w", d.Name, err)
	}
	klog.InfoS("Grew the volume's layer to its LV", "layer", d.Name, "from", d.Sectors, "to", sectors)
	return nil
}

// Remove removes vg/lv's layer, if there is one over the LV numbered
// lvRdev: NodeUnstage's last step, once nothing is mounted from it. A
// layer still open is busy (the kernel's EBUSY: volume.ErrInUse), and
// stays.
func (l *Linear) Remove(ctx context.Context, vg, lv string, lvRdev uint64) error {
	d, found, err := FindLinear(vg, lv, lvRdev)
	if err != nil || !found {
		return err
	}
	if err := l.dm.Remove(ctx, d.Name, d.Rdev); err != nil {
		if errors.Is(err, unix.EBUSY) {
			err = fmt.Errorf("%w: %w", volume.ErrInUse, err)
		}
		return fmt.Errorf("remove layer %s of %s/%s: %w", d.Name, vg, lv, err)
	}
	klog.InfoS("Removed the volume's layer", "vg", vg, "lv", lv, "layer", d.Name)
	return nil
}

// Suspend holds the layer's I/O: the filesystem on it is flushed and
// frozen first (lockfs), so what lies on the LV below is the
// filesystem at one instant, clean. On failure the layer is resumed: a
// suspend cut short may still have taken effect in the kernel.
func (l *Linear) Suspend(ctx context.Context, d Device) error {
	if err := l.dm.Suspend(ctx, d.Name); err != nil {
		if rerr := l.Resume(context.WithoutCancel(ctx), d); rerr != nil {
			klog.ErrorS(rerr, "Resume after a failed suspend", "layer", d.Name)
		}
		return fmt.Errorf("suspend layer %s: %w", d.Name, err)
	}
	return nil
}

// Resume lets the layer's I/O go on and thaws its filesystem.
func (l *Linear) Resume(ctx context.Context, d Device) error {
	if err := l.dm.Resume(ctx, d.Name); err != nil {
		return fmt.Errorf("resume layer %s: %w", d.Name, err)
	}
	return nil
}

// sysDMBlock lists the kernel's block devices by name; a variable for
// tests.
var sysDMBlock = "/sys/block"

// ResumeLeftovers resumes every layer left suspended: a Carve killed
// between a group snapshot's suspend and resume leaves its volumes' I/O
// held for good, and lvm2 commands that read the layers hang. Carve runs
// it at its start, before any lvm2 command; only Carve suspends its
// layers, and none of its calls runs yet. It returns the layers resumed.
func (l *Linear) ResumeLeftovers(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(sysDMBlock)
	if err != nil {
		return nil, fmt.Errorf("list block devices: %w", err)
	}
	var resumed []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "dm-") {
			continue
		}
		name, suspended, ours := layerState(filepath.Join(sysDMBlock, e.Name(), "dm"))
		if !ours || !suspended {
			continue
		}
		if err := l.dm.Resume(ctx, name); err != nil {
			return resumed, fmt.Errorf("resume layer %s left suspended: %w", name, err)
		}
		klog.InfoS("Resumed a layer left suspended (Carve stopped inside a snapshot's freeze)", "layer", name)
		resumed = append(resumed, name)
	}
	return resumed, nil
}

// layerState reads a device-mapper device's sysfs directory dir: its name,
// whether it is suspended, and whether it is one of Carve's linear layers.
func layerState(dir string) (name string, suspended, ours bool) {
	uuid, err := os.ReadFile(filepath.Join(dir, "uuid"))
	if err != nil || !strings.HasPrefix(string(uuid), linearUUIDPrefix) {
		return "", false, false
	}
	b, err := os.ReadFile(filepath.Join(dir, "name"))
	if err != nil {
		return "", false, false
	}
	s, err := readUint(filepath.Join(dir, "suspended"))
	return strings.TrimSpace(string(b)), err == nil && s == 1, true
}

// table is a linear table mapping the whole device numbered rdev.
func table(sectors, rdev uint64) []Target {
	return []Target{{Length: sectors, Type: "linear", Params: fmt.Sprintf("%d:%d 0", unix.Major(rdev), unix.Minor(rdev))}}
}

// LinearUUID is the layer's device-mapper UUID: unique while the layer
// exists, for it holds its LV open and no other LV can take the number.
func LinearUUID(lvRdev uint64) string {
	return fmt.Sprintf("%s%d-%d", linearUUIDPrefix, unix.Major(lvRdev), unix.Minor(lvRdev))
}
