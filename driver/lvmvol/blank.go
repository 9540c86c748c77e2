package lvmvol

import (
	"context"
	"fmt"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// newInactive tells the volume types whose LV is created inactive, and
// blanked by Carve (blankNew) rather than by lvcreate: raid1 with
// dm-integrity. lvm2 2.03.16 makes that LV by activating a plain raid1 and
// then suspending and reloading it to slide the integrity layer under its
// legs; when the raid's initial resync has started by then, Debian 12's
// kernel (6.1) can deadlock there: the resync thread waits in raid1's
// wait_barrier on the suspended array while lvcreate, in the device's
// removal, waits for that thread (kthread_stop), both in D state for good.
// Seen in the faults suite's VM in two of three creates through Carve
// (never in five plain lvcreates); created inactive, lvm2 builds the whole
// stack in metadata and the first activation loads it whole, so no array
// is ever suspended while it syncs.
func newInactive(t volume.Type) bool { return t.Integrity }

// blankStart and blankEnd are how much of a new LV's start and end
// blankNew zeroes: lvm2's --zero y clears 4 KiB and --wipesignatures y
// what blkid finds; 4 MiB from the start covers the signatures at the start
// (filesystems, LUKS2's two headers, md 1.1/1.2, partition tables) and 1
// MiB from the end those kept there (md 0.9/1.0, GPT's backup).
const (
	blankStart = 4 << 20
	blankEnd   = 1 << 20
)

// blankNew activates a new LV created inactive and zeroes its start and end,
// so that what a former LV left on those extents reads as blank (NodeStage
// formats only a blank device). It leaves the LV active: finishCreate
// deactivates it.
func (m *Manager) blankNew(ctx context.Context, lv lvm.LV) error {
	ref := lv.VGName + "/" + lv.Name
	if m.wiper == nil {
		return fmt.Errorf("blank new volume %s: no wiper configured", ref)
	}
	if err := m.lvm.Activate(ctx, lv.VGName, lv.Name); err != nil {
		return fmt.Errorf("activate new volume %s to blank it: %w", ref, err)
	}
	dev := devicePath(lv.VGName, lv.Name)
	size := int64(lv.Size)
	head, tail := min(size, blankStart), min(size, blankEnd)
	if err := m.wiper.Zero(ctx, dev, 0, head); err != nil {
		return fmt.Errorf("blank new volume %s: %w", ref, err)
	}
	if err := m.wiper.Zero(ctx, dev, size-tail, tail); err != nil {
		return fmt.Errorf("blank new volume %s: %w", ref, err)
	}
	if err := m.wiper.Flush(ctx, dev); err != nil {
		return fmt.Errorf("blank new volume %s: %w", ref, err)
	}
	return nil
}
