//go:build vmtest

// Package lifecycle walks volumes through the whole CSI lifecycle against
// `carve standalone` on a real volume group, checking LVM and the data at
// every step: attach is activation, data survives unstage/restage and
// restarts, nothing is ever reformatted, and freed space never shows a
// former tenant's data. It runs as root in the test VM (scripts/test-vm.sh).
package lifecycle

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/mount-utils"

	"carve.dev/carve/lvm"
	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/fixture"
	"carve.dev/carve/test/testenv"
)

const (
	vg   = "lifevg"
	node = "life-node"
	mib  = 1 << 20
)

var snw = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER

type env struct {
	t        *testing.T
	lvm      *lvm.Client
	c        *csiflow.Client
	endpoint string // c's
	dir      string
	disks    []string // the VG's PVs
}

// setup makes a VG on the scratch disk and starts carve on it.
func setup(t *testing.T) *env {
	t.Helper()
	disks := []string{testenv.Disk(t, "CARVE_TEST_DISK")}
	if d := os.Getenv("CARVE_TEST_DISK2"); d != "" {
		disks = append(disks, d) // raid1 and stripes need a second PV
	}
	return newEnv(t, disks, t.TempDir())
}

// newEnv makes the VG on disks and starts carve on it with args beside
// the VG and node; dir holds the test's paths.
func newEnv(t *testing.T, disks []string, dir string, args ...string) *env {
	t.Helper()
	l := testenv.PrivateLVM(t)
	testenv.NewVG(t, l, vg, disks...)
	endpoint := testenv.StartCarve(t, testenv.Options{}, append([]string{"--volume-groups=" + vg, "--node-id=" + node}, args...)...).Endpoint
	return &env{t: t, lvm: l, c: dial(t, endpoint), endpoint: endpoint, dir: dir, disks: disks}
}

// secondDisk is the scratch disk beside the VG's first ($CARVE_TEST_DISK2);
// without it the test is skipped, or fails where fixtures are required,
// saying why it needs one.
func secondDisk(t *testing.T, why string) string {
	t.Helper()
	d := os.Getenv("CARVE_TEST_DISK2")
	if d == "" {
		fixture.Missing(t, "CARVE_TEST_DISK2 is not set: %s", why)
	}
	return d
}

func start(t *testing.T) *csiflow.Client {
	t.Helper()
	return dial(t, testenv.StartCarve(t, testenv.Options{}, "--volume-groups="+vg, "--node-id="+node).Endpoint)
}

func dial(t *testing.T, endpoint string) *csiflow.Client {
	t.Helper()
	c, err := csiflow.Dial(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func (e *env) path(name string) string { return filepath.Join(e.dir, name) }

// lv reads the volume's LV from lvm2 itself.
func (e *env) lv(v *csiflow.Volume) (lvm.LV, bool) {
	e.t.Helper()
	lv, err := e.lvm.GetLV(context.Background(), vg, filepath.Base(v.ID))
	if err != nil {
		return lvm.LV{}, false
	}
	return lv, true
}

func (e *env) wantActive(v *csiflow.Volume, active bool, when string) {
	e.t.Helper()
	lv, ok := e.lv(v)
	if !ok {
		e.t.Fatalf("%s: LV of %s missing", when, v.ID)
	}
	if lv.Active != active {
		e.t.Fatalf("%s: LV active=%v, want %v", when, lv.Active, active)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("%s: code %v (%v), want %v", what, got, err, code)
	}
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func writeSynced(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	must(t, err)
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	must(t, f.Sync())
	must(t, f.Close())
}

func readPrefix(t *testing.T, path string, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer func() { _ = f.Close() }()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

func TestFilesystemLifecycle(t *testing.T) {
	e := setup(t)
	for _, tc := range []struct {
		fs   string
		size int64
	}{{"ext4", 64 * mib}, {"xfs", 320 * mib}} {
		t.Run(tc.fs, func(t *testing.T) { e.t = t; e.filesystemLifecycle(tc.fs, tc.size) })
	}
}

func (e *env) filesystemLifecycle(fs string, size int64) {
	t, ctx := e.t, context.Background()
	v, err := e.c.Create(ctx, "pvc-"+fs, size, map[string]string{"fsType": fs}, csiflow.MountCap(snw, "", "noatime"))
	must(t, err)
	e.wantActive(v, false, "after CreateVolume")

	staging, target := e.path(fs+"-staging"), e.path(fs+"-target")
	must(t, v.Attach(ctx, node))
	e.wantActive(v, true, "after ControllerPublishVolume")
	if dev := v.PublishContext["devicePath"]; dev != "/dev/"+vg+"/pvc-"+fs {
		t.Fatalf("publish context device %q", dev)
	}
	must(t, v.Stage(ctx, staging))
	must(t, v.Stage(ctx, staging)) // idempotent
	must(t, v.Publish(ctx, target, false))
	must(t, v.Publish(ctx, target, false)) // idempotent
	for _, p := range []string{staging, target} {
		if opts := mountOptions(t, p); !slices.Contains(opts, "noatime") {
			t.Fatalf("mount flag noatime not honoured at %s: %v", p, opts)
		}
	}

	data := randomBytes(t, 1*mib)
	writeSynced(t, filepath.Join(target, "data"), data)
	e.checkStats(v, target, size)

	must(t, v.Down(ctx, target))
	e.wantActive(v, false, "after ControllerUnpublishVolume")
	if _, err := os.Stat(v.PublishContext["devicePath"]); !os.IsNotExist(err) {
		t.Fatalf("device of an unpublished volume still there: %v", err)
	}
	must(t, v.Down(ctx, target)) // idempotent all the way

	// The data survives, and a second publish is read-only where asked.
	must(t, v.Up(ctx, node, staging, target))
	if got := readPrefix(t, filepath.Join(target, "data"), len(data)); !bytes.Equal(got, data) {
		t.Fatal("data changed across unstage/restage: the volume was reformatted or lost writes")
	}
	ro := e.path(fs + "-ro")
	must(t, v.Publish(ctx, ro, true))
	if err := os.WriteFile(filepath.Join(ro, "x"), []byte("x"), 0o644); err == nil {
		t.Fatal("write through a read-only publish succeeded")
	}
	must(t, v.Unpublish(ctx, ro))
	if _, err := os.Stat(ro); !os.IsNotExist(err) {
		t.Fatalf("unpublished target not removed: %v", err)
	}

	_, err = e.c.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.ID})
	wantCode(t, "delete while published", err, codes.FailedPrecondition)
	must(t, v.Down(ctx, target))
	must(t, v.Delete(ctx))
	if _, ok := e.lv(v); ok {
		t.Fatal("LV still there after DeleteVolume")
	}
	must(t, v.Delete(ctx))
}

// needMkfs skips a filesystem whose tools this machine lacks (btrfs is
// optional in Carve); the harness's machine has them all (.ci/run
// installs them), so under it a missing one fails.
func needMkfs(t *testing.T, fs string) {
	t.Helper()
	if _, err := exec.LookPath("mkfs." + fs); err != nil {
		fixture.Missing(t, "mkfs.%s not installed", fs)
	}
}

// mountAt finds the mount at path, the topmost when several are stacked
// there; false when path is not a mount point.
func mountAt(t *testing.T, path string) (mount.MountInfo, bool) {
	t.Helper()
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	must(t, err)
	for i := len(infos) - 1; i >= 0; i-- { // the topmost mount wins
		if infos[i].MountPoint == path {
			return infos[i], true
		}
	}
	return mount.MountInfo{}, false
}

// mountOptions reads the per-mount options of the mount at path.
func mountOptions(t *testing.T, path string) []string {
	t.Helper()
	mi, ok := mountAt(t, path)
	if !ok {
		t.Fatalf("%s is not a mount point", path)
	}
	return mi.MountOptions
}

func (e *env) checkStats(v *csiflow.Volume, target string, size int64) {
	t := e.t
	st, err := e.c.Node.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: v.ID, VolumePath: target})
	must(t, err)
	var bytesUsage *csi.VolumeUsage
	for _, u := range st.GetUsage() {
		if u.GetUnit() == csi.VolumeUsage_BYTES {
			bytesUsage = u
		}
	}
	if bytesUsage == nil || bytesUsage.GetTotal() < size*8/10 || bytesUsage.GetTotal() > size {
		t.Fatalf("stats %v: want about %d bytes total", st.GetUsage(), size)
	}
	if bytesUsage.GetUsed() < 1*mib {
		t.Fatalf("stats used %d, want at least the 1 MiB written", bytesUsage.GetUsed())
	}
	h, err := e.c.Node.NodeGetVolumeHealth(context.Background(), &csi.NodeGetVolumeHealthRequest{VolumeId: v.ID, VolumePublishPath: target})
	must(t, err)
	if n := len(h.GetVolumeHealth().GetHealthStatuses()); n != 0 {
		t.Fatalf("healthy published volume reports %v", h.GetVolumeHealth().GetHealthStatuses())
	}
}

func TestBlockLifecycle(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	v, err := e.c.Create(ctx, "pvc-block", 16*mib, nil, csiflow.BlockCap(snw))
	must(t, err)
	target := e.path("block-target")
	must(t, v.Up(ctx, node, e.path("block-staging"), target))
	data := randomBytes(t, 4*mib)
	writeSynced(t, target, data)
	st, err := e.c.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: v.ID, VolumePath: target})
	must(t, err)
	if got := st.GetUsage()[0].GetTotal(); got != 16*mib {
		t.Fatalf("block stats total %d, want %d", got, 16*mib)
	}
	must(t, v.Down(ctx, target))
	e.wantActive(v, false, "after detach")
	must(t, v.Up(ctx, node, e.path("block-staging"), target))
	if got := readPrefix(t, target, len(data)); !bytes.Equal(got, data) {
		t.Fatal("raw block data changed across detach/attach")
	}
	must(t, v.Down(ctx, target))
	must(t, v.Delete(ctx))
}

// TestFreedSpaceIsZeroed writes a pattern over a whole volume, deletes it,
// and carves a new volume from the same extents: it must read zeroes.
func TestFreedSpaceIsZeroed(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	const size = 32 * mib
	old, err := e.c.Create(ctx, "tenant-a", size, nil, csiflow.BlockCap(snw))
	must(t, err)
	target := e.path("a")
	must(t, old.Up(ctx, node, e.path("a-staging"), target))
	secret := bytes.Repeat([]byte("TENANT-A-SECRET!"), size/16)
	writeSynced(t, target, secret)
	must(t, old.Down(ctx, target))
	must(t, old.Delete(ctx))

	// The VG holds nothing else, so lvm2 carves the new LV from the same
	// first free extents.
	next, err := e.c.Create(ctx, "tenant-b", size, nil, csiflow.BlockCap(snw))
	must(t, err)
	target = e.path("b")
	must(t, next.Up(ctx, node, e.path("b-staging"), target))
	got := readPrefix(t, target, size)
	if i := bytes.IndexFunc(got, func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("new volume shows non-zero data at byte %d: %q", i, got[i:min(i+32, len(got))])
	}
	must(t, next.Down(ctx, target))
	must(t, next.Delete(ctx))
}

// written is a new ext4 volume of size, staged and published, with n
// random bytes written and synced to its file "data".
func (e *env) written(name string, size int64, n int) (v *csiflow.Volume, staging, target string, data []byte) {
	e.t.Helper()
	ctx := context.Background()
	v, err := e.c.Create(ctx, name, size, nil, csiflow.MountCap(snw, "ext4"))
	must(e.t, err)
	staging, target = e.path(name+"-staging"), e.path(name+"-target")
	must(e.t, v.Up(ctx, node, staging, target))
	data = randomBytes(e.t, n)
	writeSynced(e.t, filepath.Join(target, "data"), data)
	return v, staging, target, data
}

// TestNeverReformats stages a volume holding ext4 as xfs: refused, data kept.
func TestNeverReformats(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	v, staging, target, data := e.written("pvc-keep", 320*mib, 64*1024)
	must(t, v.Unpublish(ctx, target))
	must(t, v.Unstage(ctx))

	v.Cap = csiflow.MountCap(snw, "xfs")
	err := v.Stage(ctx, staging)
	wantCode(t, "stage ext4 volume as xfs", err, codes.FailedPrecondition)

	v.Cap = csiflow.MountCap(snw, "ext4")
	must(t, v.Stage(ctx, staging))
	must(t, v.Publish(ctx, target, false))
	if got := readPrefix(t, filepath.Join(target, "data"), len(data)); !bytes.Equal(got, data) {
		t.Fatal("data lost after a refused restage")
	}
	must(t, v.Down(ctx, target))
	must(t, v.Delete(ctx))
}

// TestRestartKeepsState restarts carve: the volumes, their publish state and
// their data are all still there, read back from LVM.
func TestRestartKeepsState(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	a, err := e.c.Create(ctx, "pvc-a", 16*mib, nil, csiflow.MountCap(snw, ""))
	must(t, err)
	b, err := e.c.Create(ctx, "pvc-b", 16*mib, nil, csiflow.MountCap(snw, ""))
	must(t, err)
	must(t, a.Attach(ctx, node))

	e.c = start(t) // a second carve on the same VG; the first is idle
	list, err := e.c.Controller.ListVolumes(ctx, &csi.ListVolumesRequest{})
	must(t, err)
	published := map[string][]string{}
	for _, en := range list.GetEntries() {
		published[en.GetVolume().GetVolumeId()] = en.GetStatus().GetPublishedNodeIds()
	}
	if len(published) != 2 || len(published[a.ID]) != 1 || len(published[b.ID]) != 0 {
		t.Fatalf("after restart ListVolumes = %v, want %s published on %s and %s not", published, a.ID, node, b.ID)
	}
	// The new process finishes what the old one started.
	a2, err := e.c.Create(ctx, "pvc-a", 16*mib, nil, csiflow.MountCap(snw, ""))
	must(t, err)
	if a2.ID != a.ID {
		t.Fatalf("re-create after restart gave %s, want %s", a2.ID, a.ID)
	}
	a2.NodeID = node
	must(t, a2.Detach(ctx))
	for _, v := range []*csiflow.Volume{a2, b} {
		v.NodeID = node
		must(t, v.Delete(ctx))
	}
}
