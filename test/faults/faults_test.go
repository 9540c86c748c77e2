//go:build vmtest

// Package faults runs `carve standalone` on a volume group whose PVs are
// device-mapper devices the test controls, and breaks them under Carve:
// every IO error (dm's error target) while a volume is mounted, while one
// is created, deleted or snapshotted, a raid1 leg gone, a VG and a thin
// pool full. Carve must answer with clear errors, report health as it is,
// never hand out a half-made volume or snapshot, lose nothing already
// written, and finish the interrupted work once the fault clears.
package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// pv is a scratch disk seen through a dm device whose table the test
// swaps: linear (healthy) or error (every IO fails).
type pv struct {
	t       *testing.T
	name    string // dm name: the PV is /dev/mapper/<name>
	disk    string
	sectors int64
}

func newPV(t *testing.T, name, disk string) *pv {
	t.Helper()
	out, err := exec.Command("blockdev", "--getsz", disk).Output()
	if err != nil {
		t.Fatalf("blockdev --getsz %s: %v", disk, err)
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	p := &pv{t: t, name: name, disk: disk, sectors: sectors}
	p.dmsetup("create", name, "--table", p.linear())
	t.Cleanup(func() { _ = exec.Command("dmsetup", "remove", "--retry", name).Run() })
	return p
}

func (p *pv) path() string   { return "/dev/mapper/" + p.name }
func (p *pv) linear() string { return fmt.Sprintf("0 %d linear %s 0", p.sectors, p.disk) }

// fail makes every IO to the PV fail; heal brings the disk back.
func (p *pv) fail() { p.swap(fmt.Sprintf("0 %d error", p.sectors)) }
func (p *pv) heal() { p.swap(p.linear()) }

// failData fails every IO but to the PV's first MiB, where lvm2 keeps its
// label and metadata: the VG still reads, every LV's data fails (bad
// sectors under the volumes, as a dying disk has them).
func (p *pv) failData() {
	p.swap(fmt.Sprintf("0 %d linear %s 0\n%d %d error", metaSectors, p.disk, metaSectors, p.sectors-metaSectors))
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
	disks := []string{testenv.Disk(t, "CARVE_TEST_DISK"), testenv.Disk(t, "CARVE_TEST_DISK2")}
	l := testenv.PrivateLVM(t)
	hideDisks(t)
	e := &env{t: t, lvm: l, dir: t.TempDir()}
	var paths []string
	for i, d := range disks {
		p := newPV(t, fmt.Sprintf("carve-fault%d", i), d)
		e.pvs = append(e.pvs, p)
		paths = append(paths, p.path())
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
	endpoint := testenv.StartCarve(t, append([]string{"--volume-groups=" + vg, "--node-id=" + node}, args...)...)
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
