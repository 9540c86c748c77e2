package lvm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// dmsetupBinary reports and repairs device-mapper devices: lvm2 shows no
// table that is loaded but not live, nor the layers (-real, -cow) that
// are no LVs, and offers no way to drop a stale table.
const dmsetupBinary = "dmsetup"

// settleDelay is how long a suspended device or loaded table must stay to
// count as a leftover (RepairInterrupted).
var settleDelay = 2 * time.Second

// dmDevice is one row of `dmsetup info -c`: a device-mapper device.
type dmDevice struct {
	Name, UUID          string
	Suspended, Inactive bool // suspended; a table loaded but not live
}

// RepairInterrupted undoes what an lvm2 command of vg's cut short (a
// SIGKILL of carve takes its lvm2 children along; the runner kills one
// that outlives its time) leaves in the kernel. Carve runs it at its start
// and after each of its own changing commands that was cut (Client.run):
//
//   - A device left suspended blocks every I/O to it for good: measured
//     with lvm2 2.03.16, an lvcreate -s of a raid1 volume killed 0.335 s
//     in left the volume suspended, with the new tables loaded beside the
//     live one. Writes to the published volume hung (the soak's worker).
//     A thin LV left suspended also wedges its pool at its next thin
//     snapshot: lvm2 takes the suspension as its own, sends the pool no
//     messages and commits them queued (measured: the pool's transaction
//     ids then 2 apart, every later thin create refused).
//   - lvchange --refresh resumes a suspended LV (a suspended sub-LV too,
//     refreshing its LV), but takes a loaded inactive table as its own
//     and makes it live (measured: it put an error table live that way).
//     So stale inactive tables are cleared first (dmsetup clear); then,
//     if a device was suspended, every active LV of the VG is refreshed:
//     lvm2 loads each tree's tables from the metadata and resumes it
//     lower devices first (see refreshActive for why not dmsetup resume).
//   - Otherwise an LV whose live tables do not match what the metadata
//     says (the cut command committed its metadata: lvs reports the state
//     X) is refreshed the same way.
//
// What is found and cleared is decided under lvm2's VG lock, held shared
// (see lockVGShared): no lvm2 command of the VG is then between its
// suspend and resume, or its load and resume, so what is suspended or
// loaded is a leftover, even while other Carve calls run. An
// administrator's dmsetup suspend takes no lock: only what is still so a
// moment later counts. The refreshes run after the lock is released
// (lvchange takes it exclusively).
//
// It runs one dmsetup info and, only when some device is suspended or
// holds an inactive table, a vgs (whose UUID tells the VG's devices), the
// repairs and an lvs. What it did is logged and returned.
func (c *Client) RepairInterrupted(ctx context.Context, vgName string) ([]string, error) {
	if err := ValidateVGName(vgName); err != nil {
		return nil, err
	}
	devs, err := c.dmDevicesOf(ctx, nil)
	if err != nil || len(devs) == 0 {
		return nil, err
	}
	// Read before the lock: a vgs under it would wait for an lvm2 command
	// queued for it (see readThinPool). A VG's UUID does not change.
	vg, err := c.GetVG(ctx, vgName)
	if err != nil {
		return nil, err
	}
	if devs = vgDevices(devs, vg); len(devs) == 0 {
		return nil, nil
	}
	did, suspended, err := c.clearLeftovers(ctx, vg, devs)
	if err != nil || len(did) == 0 && !suspended {
		return did, err
	}
	refreshed, err := c.refreshActive(ctx, vg.Name, suspended)
	did = append(did, refreshed...)
	for _, what := range did {
		klog.InfoS("Repaired what an interrupted lvm2 command left", "vg", vg.Name, "repair", what)
	}
	return did, err
}

// clearLeftovers finds, under vg's lock, which of devs are still
// suspended or hold an inactive table a moment later, and clears those
// tables; suspended tells whether a device was left suspended.
func (c *Client) clearLeftovers(ctx context.Context, vg VG, devs []dmDevice) ([]string, bool, error) {
	unlock, err := c.lockVGShared(ctx, vg.Name)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	select {
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case <-time.After(settleDelay):
	}
	again, err := c.dmDevicesOf(ctx, &vg)
	if err != nil {
		return nil, false, err
	}
	devs = slices.DeleteFunc(again, func(d dmDevice) bool { return !slices.Contains(devs, d) })
	var did []string
	for _, d := range devs {
		if d.Inactive {
			if _, err := c.r.Run(ctx, dmsetupBinary, "clear", d.Name); err != nil {
				return did, false, fmt.Errorf("dmsetup clear %s (a table left loaded by an interrupted lvm2 command): %w", d.Name, err)
			}
			did = append(did, "cleared the stale inactive table of "+d.Name)
		}
	}
	return did, slices.ContainsFunc(devs, func(d dmDevice) bool { return d.Suspended }), nil
}

// refreshActive refreshes the LVs of vg that are active but not live
// after the tables were cleared (see LV.Live), or, when a device was found
// suspended, every active LV of vg. A suspended device is resumed by
// lvm2's refresh of the LV whose tree holds it, in lvm2's order, lower
// devices first: resumed by hand top first, the thaw of a filesystem on a
// volume whose lower layer (-real) was still suspended blocked for good
// (the soak). lvm2 does not say which LV a layer or sub-LV device is
// part of, and a refresh pauses an LV's I/O only for a moment, so all
// are refreshed; this runs only after a kill left something behind.
func (c *Client) refreshActive(ctx context.Context, vg string, all bool) ([]string, error) {
	lvs, err := c.ListLVs(ctx, vg)
	if err != nil {
		return nil, err
	}
	var did []string
	for _, lv := range lvs {
		if !lv.Active || lv.Live() && !all || lv.IsCOWSnapshot() {
			continue // a COW snapshot is refreshed with its origin
		}
		if err := c.lvchange(ctx, "refresh", vg, lv.Name, "--refresh"); err != nil {
			return did, err
		}
		did = append(did, fmt.Sprintf("refreshed %s/%s (attr %s)", vg, lv.Name, lv.Attr))
	}
	return did, nil
}

// dmDevicesOf lists the device-mapper devices that are suspended or hold
// an inactive table: those of vg's LVs, or of any VG when vg is nil.
func (c *Client) dmDevicesOf(ctx context.Context, vg *VG) ([]dmDevice, error) {
	out, err := c.r.Run(ctx, dmsetupBinary, "info", "-c", "--noheadings", "--separator", "|",
		"-o", "name,uuid,suspended,tables_loaded")
	if err != nil {
		return nil, fmt.Errorf("dmsetup info: %w", err)
	}
	devs, err := parseDMInfo(string(out))
	if err != nil {
		return nil, err
	}
	devs = slices.DeleteFunc(devs, func(d dmDevice) bool { return !d.Suspended && !d.Inactive })
	if vg == nil {
		return devs, nil
	}
	return vgDevices(devs, *vg), nil
}

// vgDevices keeps the devices of vg's LVs. lvm2 names a device's UUID
// "LVM-" + the VG's UUID + the LV's UUID (without dashes), layers with a
// suffix: the prefix tells vg's devices, whatever their names. A VG
// reported without a UUID has none.
func vgDevices(devs []dmDevice, vg VG) []dmDevice {
	if vg.UUID == "" {
		return nil
	}
	prefix := "LVM-" + strings.ReplaceAll(vg.UUID, "-", "")
	return slices.DeleteFunc(devs, func(d dmDevice) bool { return !strings.HasPrefix(d.UUID, prefix) })
}

// parseDMInfo reads `dmsetup info -c --noheadings --separator '|' -o
// name,uuid,suspended,tables_loaded`. With no device at all, dmsetup
// prints "No devices found".
func parseDMInfo(out string) ([]dmDevice, error) {
	var devs []dmDevice
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line == "No devices found" {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != 4 || f[0] == "" {
			return nil, fmt.Errorf("dmsetup info: unexpected line %q", line)
		}
		var d dmDevice
		d.Name, d.UUID = f[0], f[1]
		switch f[2] {
		case "Suspended":
			d.Suspended = true
		case "Active":
		default:
			return nil, fmt.Errorf("dmsetup info: device %s: unexpected state %q", f[0], f[2])
		}
		switch f[3] {
		case "Both", "Inactive":
			d.Inactive = true
		case "Live", "None":
		default:
			return nil, fmt.Errorf("dmsetup info: device %s: unexpected tables %q", f[0], f[3])
		}
		devs = append(devs, d)
	}
	return devs, nil
}
