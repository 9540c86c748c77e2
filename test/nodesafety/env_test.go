//go:build vmtest

// Package nodesafety sends `carve standalone`'s node service, on real LVM,
// the volume IDs and paths a CO can send by mistake (a hand-written PV
// volumeHandle, a stale ID, a CO bug, a second driver on the node), and
// checks that each is refused with the right code and changes nothing: a
// canary volume staged and published with known data keeps its data and
// its mounts, an LV of a VG Carve does not serve, an LV of Carve's VG
// without Carve's tag and a spare raw disk keep every byte, files and
// directories in and out of the CO's directory stay, and no mount appears.
// It runs as root in the test VM (scripts/test-vm.sh).
package nodesafety

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"carve.dev/carve/lvm"
	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

const (
	vg        = "safevg"
	foreignVG = "othervg"
	node      = "safe-node"
	mib       = 1 << 20
	// rawAlias is a device node of the spare raw disk outside /dev, which
	// the ID node/../rawAlias would reach as /dev/../rawAlias.
	rawAlias = "/nodesafety-raw"
)

var snw = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER

type env struct {
	t       *testing.T
	c       *csiflow.Client
	lvm     *lvm.Client // the test's own view of LVM (private config)
	root    string      // carve's --path-root: the CO's directory
	outside string      // a directory outside it
	rawDisk string

	canary, victim, small       *csiflow.Volume // victim, small: attached, blank, never staged
	canaryStaging, canaryTarget string
	canaryData                  []byte
	canaryNames                 []string // what its filesystem's root holds

	guarded map[string][32]byte // device or file -> hash of what it must keep holding
	lengths map[string]int64    // bytes of each guarded device that are hashed
	mounts  []string            // /proc/self/mountinfo once everything is in place
}

// setup builds the scene: a served VG with the canary (ext4, staged and
// published through carve, data written through the pod's path) and the
// victim (attached only), an LV "plain" in it without Carve's tag, a VG
// Carve does not serve with an LV "x", a spare raw disk, random bytes on
// all three, and files and directories inside and outside the root.
func setup(t *testing.T) *env {
	disk, disk2 := testenv.Disk(t, "CARVE_TEST_DISK"), testenv.Disk(t, "CARVE_TEST_DISK2")
	e := &env{t: t, rawDisk: testenv.Disk(t, "CARVE_TEST_RAW"), guarded: map[string][32]byte{}, lengths: map[string]int64{}}
	l := testenv.PrivateLVM(t)
	e.lvm = l
	testenv.NewVG(t, l, vg, disk)
	testenv.NewVG(t, l, foreignVG, disk2)
	ctx := context.Background()
	for _, o := range []lvm.CreateLVOptions{{VG: foreignVG, Name: "x", Size: 8 * mib}, {VG: vg, Name: "plain", Size: 8 * mib}} {
		if _, err := l.CreateLV(ctx, o); err != nil {
			t.Fatal(err)
		}
		e.guardDevice("/dev/"+o.VG+"/"+o.Name, 8*mib)
	}
	e.guardDevice(e.rawDisk, 1*mib)
	e.rawNodeOutsideDev()
	e.paths()

	e.c = dial(t, testenv.StartCarve(t, testenv.Options{}, "--volume-groups="+vg, "--node-id="+node, "--path-root="+e.root, "--device-wait=2s").Endpoint)
	e.canaryUp(ctx)
	e.victim, e.small = e.blank(ctx, "victim"), e.blank(ctx, "small")
	e.mounts = mountinfo(t)
	e.undoNewMountsAtEnd()
	return e
}

// blank creates and attaches a 16 MiB volume, never to be staged: its
// first MiB is guarded, so a misuse that formats it is seen.
func (e *env) blank(ctx context.Context, name string) *csiflow.Volume {
	v, err := e.c.Create(ctx, name, 16*mib, nil, csiflow.MountCap(snw, "ext4"))
	must(e.t, err)
	must(e.t, v.Attach(ctx, node))
	dev := v.PublishContext["devicePath"]
	h, err := hashPrefix(dev, 1*mib)
	must(e.t, err)
	e.guarded[dev], e.lengths[dev] = h, 1*mib
	return v
}

func dial(t *testing.T, endpoint string) *csiflow.Client {
	c, err := csiflow.Dial(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// guardDevice writes random bytes over the first n bytes of dev and
// remembers them.
func (e *env) guardDevice(dev string, n int64) {
	f, err := os.OpenFile(dev, os.O_WRONLY|unix.O_DIRECT, 0)
	must(e.t, err)
	buf := alignedRandom(e.t, int(n))
	if _, err := f.Write(buf); err != nil {
		e.t.Fatalf("write %s: %v", dev, err)
	}
	must(e.t, f.Close())
	e.guarded[dev], e.lengths[dev] = sha256.Sum256(buf), n
}

// alignedRandom is n random bytes in a buffer O_DIRECT accepts.
func alignedRandom(t *testing.T, n int) []byte {
	buf := aligned(n)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	return buf
}

// aligned is a buffer of n bytes at a page boundary, as O_DIRECT wants.
func aligned(n int) []byte {
	raw := make([]byte, n+4096)
	off := (4096 - int(uintptr(unsafe.Pointer(&raw[0]))%4096)) % 4096
	return raw[off : off+n]
}

// rawNodeOutsideDev makes rawAlias a node of the raw disk: what
// node/../nodesafety-raw would have carve format, were the ID trusted.
func (e *env) rawNodeOutsideDev() {
	var st unix.Stat_t
	must(e.t, unix.Stat(e.rawDisk, &st))
	_ = os.Remove(rawAlias)
	must(e.t, unix.Mknod(rawAlias, unix.S_IFBLK|0o600, int(st.Rdev)))
	e.t.Cleanup(func() { _ = os.Remove(rawAlias) })
}

// paths makes the root (a CO's directory) and, inside and outside it,
// what a wrong path may point at: files with content, an empty directory,
// a directory with content, a symlink leading out.
func (e *env) paths() {
	base := e.t.TempDir()
	e.root, e.outside = filepath.Join(base, "co"), filepath.Join(base, "outside")
	e.scenery(e.t)
}

// scenery (re)creates what paths describes, where missing.
func (e *env) scenery(t *testing.T) {
	for _, d := range []string{e.root + "/pods/canary", e.root + "/pods/p", e.root + "/full", e.root + "/empty", e.outside + "/empty"} {
		must(t, os.MkdirAll(d, 0o750))
	}
	for _, f := range []string{e.root + "/full/keep", e.root + "/content", e.outside + "/file"} {
		must(t, os.WriteFile(f, []byte("not Carve's: "+f), 0o600))
		e.guarded[f] = sha256.Sum256([]byte("not Carve's: " + f))
	}
	if _, err := os.Lstat(e.root + "/link"); err != nil {
		must(t, os.Symlink(e.outside+"/empty", e.root+"/link"))
	}
}

// canaryUp creates, attaches, stages and publishes the canary through
// carve, and writes its data through the published path.
func (e *env) canaryUp(ctx context.Context) {
	var err error
	e.canary, err = e.c.Create(ctx, "canary", 64*mib, nil, csiflow.MountCap(snw, "ext4"))
	must(e.t, err)
	e.canaryStaging, e.canaryTarget = e.root+"/canary-staging", e.root+"/pods/canary/mount"
	must(e.t, e.canary.Up(ctx, node, e.canaryStaging, e.canaryTarget))
	e.canaryData = make([]byte, 1*mib)
	_, _ = rand.Read(e.canaryData)
	f, err := os.Create(e.canaryTarget + "/data")
	must(e.t, err)
	_, err = f.Write(e.canaryData)
	must(e.t, err)
	must(e.t, f.Sync())
	must(e.t, f.Close())
	e.canaryNames = []string{"data", "lost+found"}
}

// check: after a misuse, everything guarded is as it was. New mounts are
// undone (with the system's umount) so that one failure does not hide the
// checks of the next misuse.
func (e *env) check(t *testing.T) {
	t.Helper()
	got, err := os.ReadFile(e.canaryTarget + "/data")
	if err != nil || !bytes.Equal(got, e.canaryData) {
		t.Errorf("canary data changed or unreadable through its target (%v)", err)
	}
	if names := dirNames(t, e.canaryStaging); !slices.Equal(names, e.canaryNames) {
		t.Errorf("canary filesystem holds %q, want %q", names, e.canaryNames)
	}
	for path, sum := range e.guarded {
		if h, err := hashPrefix(path, e.lengths[path]); err != nil || h != sum {
			t.Errorf("%s changed (%v)", path, err)
		}
	}
	for _, p := range []string{e.root + "/empty", e.outside + "/empty", e.root + "/link"} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s is gone: %v", p, err)
		}
	}
	e.compareMounts(t)
	if t.Failed() {
		e.repair(t)
	}
}

// repair puts the scene back after a misuse changed it (only a node that
// acts on a wrong ID or path does), so that the next misuse is judged on
// its own: files and directories recreated, the canary staged and
// published again, the guarded devices' new bytes taken as the reference.
func (e *env) repair(t *testing.T) {
	e.scenery(t)
	ctx := context.Background()
	if err := e.canary.Stage(ctx, e.canaryStaging); err != nil {
		t.Logf("repair: restage canary: %v", err)
	}
	if err := e.canary.Publish(ctx, e.canaryTarget, false); err != nil {
		t.Logf("repair: republish canary: %v", err)
	}
	for path, n := range e.lengths {
		if h, err := hashPrefix(path, n); err == nil {
			e.guarded[path] = h
		}
	}
	e.mounts = mountinfo(t)
	e.canaryNames = dirNames(t, e.canaryStaging)
}

// compareMounts checks the mount table against the one setup left, and
// unmounts anything new, latest first.
func (e *env) compareMounts(t *testing.T) {
	t.Helper()
	now := mountinfo(t)
	for _, line := range e.mounts {
		if !slices.Contains(now, line) {
			t.Errorf("mount gone or changed: %s", line)
		}
	}
	for i := len(now) - 1; i >= 0; i-- {
		if !slices.Contains(e.mounts, now[i]) {
			t.Errorf("new mount: %s", now[i])
			undoMount(t, now[i])
		}
	}
}

// undoNewMountsAtEnd unmounts, when the test ends, whatever it left
// mounted beyond setup's mounts (only a misbehaving node would).
func (e *env) undoNewMountsAtEnd() {
	e.t.Cleanup(func() {
		now := mountinfo(e.t)
		for i := len(now) - 1; i >= 0; i-- {
			if !slices.Contains(e.mounts, now[i]) {
				undoMount(e.t, now[i])
			}
		}
	})
}

func undoMount(t *testing.T, line string) {
	if f := strings.Fields(line); len(f) > 4 {
		if out, err := exec.Command("umount", "-l", unescape(f[4])).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", f[4], err, out)
		}
	}
}

func mountinfo(t *testing.T) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// unescape undoes mountinfo's octal escapes (\040 and the like).
func unescape(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

func dirNames(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Errorf("read %s: %v", dir, err)
		return nil
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	return names
}

// hashPrefix hashes the first n bytes of path (all of it when n is 0),
// read around the page cache for devices.
func hashPrefix(path string, n int64) ([32]byte, error) {
	if n == 0 {
		b, err := os.ReadFile(path)
		return sha256.Sum256(b), err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return [32]byte{}, err
	}
	defer func() { _ = f.Close() }()
	b := aligned(int(n))
	if _, err := f.ReadAt(b, 0); err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
