//go:build vmtest

// Package faults runs `carve standalone` on a volume group whose PVs are
// device-mapper devices the test controls, and breaks them under Carve:
// every IO error (dm's error target) while a volume is mounted, while one
// is created, deleted or snapshotted, or halfway through a snapshot's copy
// or a wipe; a PV's device removed (a vanished disk); a raid1 leg gone; a
// VG, a thin pool's data and its metadata full. Carve must answer with
// clear errors, report health as it is, never hand out a half-made volume
// or snapshot, lose nothing already written, and finish the interrupted
// work once the fault clears.
package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"carve.dev/carve/lvm"
	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

const (
	vg   = "faultvg"
	node = "fault-node"
	mib  = 1 << 20
)

// pv is a scratch disk, or a slice of one, seen through a dm device whose
// table the test swaps: linear (healthy) or error (every IO fails).
type pv struct {
	t       *testing.T
	name    string // dm name: the PV is /dev/mapper/<name>
	disk    string
	offset  int64 // the slice's first sector on disk
	sectors int64
}

// newSlicePV is a PV on sectors of disk from offset: the raid levels
// need more PVs than the suites have disks, and lvm2 does not care which
// disk holds each.
func newSlicePV(t *testing.T, name, disk string, offset, sectors int64) *pv {
	t.Helper()
	p := &pv{t: t, name: name, disk: disk, offset: offset, sectors: sectors}
	p.dmsetup("create", name, "--table", p.linear())
	t.Cleanup(func() { _ = exec.Command("dmsetup", "remove", "--retry", name).Run() })
	return p
}

func diskSectors(t *testing.T, disk string) int64 {
	t.Helper()
	out, err := exec.Command("blockdev", "--getsz", disk).Output()
	if err != nil {
		t.Fatalf("blockdev --getsz %s: %v", disk, err)
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return sectors
}

func (p *pv) path() string { return "/dev/mapper/" + p.name }
func (p *pv) linear() string {
	return fmt.Sprintf("0 %d linear %s %d", p.sectors, p.disk, p.offset)
}

// fail makes every IO to the PV fail; heal brings the disk back, also
// after vanish.
func (p *pv) fail() { p.swap(fmt.Sprintf("0 %d error", p.sectors)) }
func (p *pv) heal() {
	if !p.exists() {
		p.dmsetup("create", p.name, "--table", p.linear())
		return
	}
	p.swap(p.linear())
}

// vanish takes the PV's device away as a pulled disk goes: `dmsetup remove
// --force` removes a device nothing holds open, and one that is held (an
// active LV on it) stays only as a node whose every IO fails (the kernel
// cannot take a device from its holders). Either way lvm2 no longer finds
// the PV: the VG reads with it missing.
func (p *pv) vanish() {
	p.t.Helper()
	// Fails with EBUSY for a held device, after replacing its table.
	_ = exec.Command("dmsetup", "remove", "--force", p.name).Run()
	if p.exists() {
		if out, _ := exec.Command("dmsetup", "table", p.name).Output(); !strings.Contains(string(out), "error") {
			p.t.Fatalf("dmsetup remove --force %s left it with table %q", p.name, out)
		}
	}
}

func (p *pv) exists() bool { return exec.Command("dmsetup", "info", p.name).Run() == nil }

// failData fails every IO but to the PV's first MiB, where lvm2 keeps its
// label and metadata: the VG still reads, every LV's data fails (bad
// sectors under the volumes, as a dying disk has them).
func (p *pv) failData() {
	p.swap(fmt.Sprintf("0 %d linear %s %d\n%d %d error", metaSectors, p.disk, p.offset, metaSectors, p.sectors-metaSectors))
}

// metaSectors: lvm2's default data start (pe_start) is 1 MiB.
const metaSectors = 2048

func (p *pv) swap(table string) {
	p.t.Helper()
	// --noflush: IO in flight is requeued to the new table instead of
	// waiting on the old one (a failing device may never complete it).
	p.dmsetup("suspend", "--noflush", p.name)
	p.dmsetup("load", p.name, "--table", table)
	p.dmsetup("resume", p.name)
}

func (p *pv) dmsetup(args ...string) {
	p.t.Helper()
	if out, err := exec.Command("dmsetup", args...).CombinedOutput(); err != nil {
		p.t.Fatalf("dmsetup %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

type env struct {
	t   *testing.T
	lvm *lvm.Client
	pvs []*pv
	c   *csiflow.Client
	dir string
}

// setup builds VG faultvg on dm devices over the scratch disks and starts
// carve on it with args.
func setup(t *testing.T, args ...string) *env {
	t.Helper()
	return setupThrottled(t, 0, args...)
}

// setupThrottled is setup with carve, and the commands it runs, writing to
// the scratch disks at wbps bytes a second at most (0: unthrottled), so
// that a copy or a wipe lasts long enough to be cut in the middle. The
// test's own writes are not throttled.
func setupThrottled(t *testing.T, wbps int64, args ...string) *env {
	t.Helper()
	return setupSliced(t, 1, wbps, args...)
}

// setupSliced is setupThrottled with each scratch disk cut into slices PVs
// of equal size (1: the whole disk).
func setupSliced(t *testing.T, slices int, wbps int64, args ...string) *env {
	t.Helper()
	disks := []string{testenv.Disk(t, "CARVE_TEST_DISK"), testenv.Disk(t, "CARVE_TEST_DISK2")}
	l := testenv.PrivateLVM(t)
	hideDisks(t)
	e := &env{t: t, lvm: l, dir: t.TempDir()}
	var paths []string
	for i, d := range disks {
		size := diskSectors(t, d) / int64(slices)
		for j := range slices {
			name := fmt.Sprintf("carve-fault%d", i)
			if slices > 1 {
				name += fmt.Sprintf("s%d", j)
			}
			p := newSlicePV(t, name, d, int64(j)*size, size)
			e.pvs = append(e.pvs, p)
			paths = append(paths, p.path())
		}
	}
	// Registered after the dm devices' cleanup, so it runs before it:
	// every fault is healed before the VG goes.
	testenv.NewVG(t, l, vg, paths...)
	t.Cleanup(func() { testenv.UnmountAll(t, e.dir, unix.MNT_DETACH) }) // after healing, before the VG goes
	t.Cleanup(func() {
		for _, p := range e.pvs {
			p.heal()
		}
	})
	cgroup := ""
	if wbps > 0 {
		cgroup = testenv.SlowCgroup(t, wbps, disks...)
	}
	endpoint := testenv.StartCarve(t, testenv.Options{Cgroup: cgroup}, append([]string{"--volume-groups=" + vg, "--node-id=" + node}, args...)...).Endpoint
	c, err := csiflow.Dial(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	e.c = c
	return e
}

// hideDisks makes lvm2 (the test's and carve's, which share the private
// configuration) ignore the raw scratch disks: their PV labels show
// through the dm devices too, and lvm2 refuses to write a VG whose PVs it
// sees twice.
func hideDisks(t *testing.T) {
	t.Helper()
	conf := filepath.Join(os.Getenv("LVM_SYSTEM_DIR"), "lvm.conf")
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "use_devicesfile = 0\n"
	if !strings.Contains(string(b), anchor) {
		t.Fatalf("%s has no devices section to extend", conf)
	}
	b = []byte(strings.Replace(string(b), anchor, anchor+"\tglobal_filter = [ \"r|^/dev/vd|\" ]\n", 1))
	if err := os.WriteFile(conf, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// lvmRun runs an lvm2 command as an administrator would.
func (e *env) lvmRun(args ...string) string {
	e.t.Helper()
	out, err := exec.Command("lvm", args...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("lvm %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (e *env) lvExists(name string) bool {
	_, err := e.lvm.GetLV(context.Background(), vg, name)
	return err == nil
}

// written is how many bytes the kernel has written to disk so far (its
// block statistics, which count a request when the disk starts it, after
// any throttling).
func written(t *testing.T, disk string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/block", filepath.Base(disk), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 7 {
		t.Fatalf("%s: block statistics %q", disk, b)
	}
	sectors, err := strconv.ParseInt(f[6], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return sectors * 512
}

// extentsOf returns the PV and the byte range on it where LV name's data
// is (a linear LV: one segment).
func (e *env) extentsOf(name string) (*pv, int64, int64) {
	e.t.Helper()
	out := strings.TrimSpace(e.lvmRun("lvs", "--noheadings", "--units", "b", "--nosuffix",
		"-o", "seg_pe_ranges,vg_extent_size,lv_size", vg+"/"+name))
	f := strings.Fields(out)
	if len(f) != 3 {
		e.t.Fatalf("lvs %s: %q, want one linear segment", name, out)
	}
	dev, pes, _ := strings.Cut(f[0], ":")
	first, _, _ := strings.Cut(pes, "-")
	pe, err1 := strconv.ParseInt(first, 10, 64)
	extent, err2 := strconv.ParseInt(f[1], 10, 64)
	size, err3 := strconv.ParseInt(f[2], 10, 64)
	must(e.t, errors.Join(err1, err2, err3))
	start, err := strconv.ParseInt(strings.TrimSpace(e.lvmRun("pvs", "--noheadings", "--units", "b", "--nosuffix", "-o", "pe_start", dev)), 10, 64)
	must(e.t, err)
	p := e.pvAt(dev)
	if p == nil {
		e.t.Fatalf("LV %s is on %s, none of the test's PVs", name, dev)
	}
	return p, start + pe*extent, size
}

// pvAt is the test's PV at path dev, nil if none.
func (e *env) pvAt(dev string) *pv {
	if i := slices.IndexFunc(e.pvs, func(p *pv) bool { return p.path() == dev }); i >= 0 {
		return e.pvs[i]
	}
	return nil
}

// allLVs names every LV of the VG, internal ones included, sorted.
func (e *env) allLVs() []string {
	e.t.Helper()
	lvs, err := e.lvm.ListAllLVs(context.Background(), vg)
	must(e.t, err)
	var names []string
	for _, lv := range lvs {
		names = append(names, lv.Name)
	}
	slices.Sort(names)
	return names
}

// free is the VG's free space.
func (e *env) free() uint64 {
	e.t.Helper()
	v, err := e.lvm.GetVG(context.Background(), vg)
	must(e.t, err)
	return v.Free
}

// legPV is the PV under image i of raid LV name (under its dm-integrity
// layer, if it has one).
func (e *env) legPV(name string, i int) *pv {
	e.t.Helper()
	image := name + "_rimage_" + strconv.Itoa(i)
	out := e.lvmRun("lvs", "-a", "--noheadings", "-o", "lv_name,devices", vg)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		lv := strings.Trim(f[0], "[]")
		if lv != image && lv != image+"_iorig" {
			continue
		}
		dev, _, _ := strings.Cut(f[1], "(")
		if p := e.pvAt(dev); p != nil {
			return p
		}
	}
	e.t.Fatalf("no PV of the test's holds %s:\n%s", image, out)
	return nil
}

func pvNames(ps []*pv) []string {
	var names []string
	for _, p := range ps {
		names = append(names, p.name)
	}
	return names
}
