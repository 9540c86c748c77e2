package lvm

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// A VG's print tells a Cache, without running lvm2, whether what lvm2
// would report of the VG may have changed since a report was read. It has
// three parts, each a few reads that take microseconds:
//   - the PVs' metadata headers (mdaprint.go): every change lvm2 writes to
//     the VG's metadata, whichever process made it;
//   - each active thin pool's usage as the kernel counts it (dmstatus.go):
//     the blocks that writes to thin volumes fill, which no metadata
//     records;
//   - lvm2's device selection (selection.go): the files that decide which
//     of the VG's PVs lvm2 finds.

// printScope is what a VG's print covers, as the Cache knows it when it
// takes one: the VG's PVs (device paths, from its last pvs report), its
// active thin pools (from its last lvs report) and the system dir its
// Client's lvm2 reads.
type printScope struct {
	vg, lvmDir string
	pvs, pools []string
}

// vgPrint is a VG's print. Only the metadata part fails: the other two
// print what they cannot read (no device-mapper in this kernel, a file
// not there) as a state of their own, so that they never turn off the
// metadata part's check.
func vgPrint(s printScope) (string, error) {
	md, err := metadataPrint(s.pvs)
	if err != nil {
		return "", err
	}
	return md + "|" + thinPoolsPrint(s.vg, s.pools) + "|" + selectionPrint(s.lvmDir), nil
}

// thinPoolsPrint is the kernel's usage of vg's pools; "" when
// device-mapper's control device cannot be opened here (a kernel without
// device-mapper, no privilege): that part then never moves.
func thinPoolsPrint(vg string, pools []string) string {
	if len(pools) == 0 {
		return ""
	}
	ctl, err := unix.Open(dmControl, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer func() { _ = unix.Close(ctl) }()
	return poolsPrint(vg, pools, func(dm string) ([]dmTarget, error) { return dmTableStatus(ctl, dm) })
}

// poolsPrint is each pool's usage, read through status (a device's
// DM_TABLE_STATUS by its device-mapper name). A pool with no thin-pool
// device is left out: it went inactive since the report, which the print
// then shows. A status that cannot be read prints its error.
func poolsPrint(vg string, pools []string, status func(dm string) ([]dmTarget, error)) string {
	var b strings.Builder
	for _, p := range pools {
		u, err := poolStatus(vg, p, status)
		switch {
		case errors.Is(err, errNoPoolDevice):
		case err != nil:
			fmt.Fprintf(&b, "%s=%v;", p, err)
		default:
			fmt.Fprintf(&b, "%s=%s;", p, u)
		}
	}
	return b.String()
}

var errNoPoolDevice = errors.New("no thin-pool device")

// poolStatus reads a thin pool's usage from its thin-pool device: the
// "-tpool" layer lvm2 puts under a pool that thin LVs use, else the
// pool's own device, which is the thin-pool target itself as long as no
// thin LV was ever made in the pool (lvm2's "new" pool, transaction id
// 0; under a used pool the pool's own device is a linear one over the
// layer).
func poolStatus(vg, pool string, status func(dm string) ([]dmTarget, error)) (poolUsage, error) {
	for _, dm := range []string{dmName(vg, pool, "tpool"), dmName(vg, pool, "")} {
		targets, err := status(dm)
		switch {
		case errors.Is(err, unix.ENXIO): // no device of that name
		case err != nil:
			return poolUsage{}, err
		case len(targets) == 1 && targets[0].kind == "thin-pool":
			return parseThinPoolUsage(targets[0].status)
		}
	}
	return poolUsage{}, errNoPoolDevice
}

// printScopeOf is vg's scope now; x.mu must be held.
func (x *Cache) printScopeOf(vg string) printScope {
	return printScope{vg: vg, lvmDir: x.lvmDir, pvs: x.pvPaths[vg], pools: x.pools[vg]}
}

// takeBasePrint takes vg's print before the first report of generation
// gen is read, so that a change after it shows (checkPrint). It covers
// what the reports before told of the VG (printScope): a PV or pool that
// the coming report shows first is not in it, but is in the next
// comparison's, whose print then differs and starts a generation that
// covers it.
func (x *Cache) takeBasePrint(vg string, gen uint64) {
	x.mu.Lock()
	b, s := x.base[vg], x.printScopeOf(vg)
	x.mu.Unlock()
	if x.print == nil || (b.gen == gen && b.print != "") || len(s.pvs) == 0 {
		return
	}
	p, err := x.print(s)
	if err != nil {
		p = "" // unknown: this generation's reports live out MaxAge
	}
	x.mu.Lock()
	if x.gens[vg] == gen && (x.base[vg].gen != gen || x.base[vg].print == "") {
		x.base[vg] = genPrint{gen: gen, print: p, checked: x.now()}
	}
	x.mu.Unlock()
}

// checkPrint compares vg's print with the one its generation began with,
// at most every printEvery, and starts a new generation when it moved:
// something outside this Cache changed the VG, or lvm2's view of it. A
// print that cannot be read now, where it could before, counts as moved:
// the fresh read tells what happened to the disks.
func (x *Cache) checkPrint(vg string) {
	x.mu.Lock()
	b, gen, s := x.base[vg], x.gens[vg], x.printScopeOf(vg)
	due := x.print != nil && b.gen == gen && b.print != "" && x.now().Sub(b.checked) >= printEvery
	if due {
		b.checked = x.now()
		x.base[vg] = b
	}
	x.mu.Unlock()
	if !due {
		return
	}
	if p, err := x.print(s); err != nil || p != b.print {
		x.mu.Lock()
		if x.gens[vg] == gen {
			x.gens[vg]++
		}
		x.mu.Unlock()
	}
}

// notePVs keeps the device paths of vg's PVs for its print.
func (x *Cache) notePVs(vg string, pvs []PV) {
	paths := make([]string, 0, len(pvs))
	for _, pv := range pvs {
		if pv.Name != "" && !pv.Missing {
			paths = append(paths, pv.Name)
		}
	}
	slices.Sort(paths)
	x.mu.Lock()
	x.pvPaths[vg] = paths
	x.mu.Unlock()
}

// notePools keeps the names of vg's active thin pools for its print: an
// inactive one has no usage in the kernel to read.
func (x *Cache) notePools(vg string, lvs []LV) {
	var pools []string
	for _, lv := range lvs {
		if lv.IsThinPool() && lv.Active {
			pools = append(pools, lv.Name)
		}
	}
	slices.Sort(pools)
	x.mu.Lock()
	x.pools[vg] = pools
	x.mu.Unlock()
}
