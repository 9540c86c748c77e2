package csi

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/nodepath"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// nodeEnv is the Node service over a fake LVM: vg0 is served and holds
// pvc-a (published; its device node is the LV's), pvc-b (not published),
// pvc-c (published, but its device node is another device's) and "plain"
// (active, no Carve tag); othervg is not served and holds x. The device
// nodes are a table: nothing here touches a real device, so these tests
// cover the refusals that happen before any device or mount is used.
type nodeEnv struct {
	n    *Node
	lvm  *namesLVM
	root string
}

// namesLVM records every VG/LV name pair that reached LVM and that lvm
// itself would refuse: there must be none. It also records the LVs read
// afresh: neither lvm.Cached nor lvm.Shared, which an lvm.Cache answers
// only by running lvs.
type namesLVM struct {
	*lvmfake.LVM
	invalid []string
	fresh   []string
}

func (l *namesLVM) GetLV(ctx context.Context, r lvm.Reads, vg, name string) (lvm.LV, error) {
	if lvm.ValidateVGName(vg) != nil || lvm.ValidateLVName(name) != nil {
		l.invalid = append(l.invalid, vg+"/"+name)
	}
	if !r.IsCached() && r.Scope() == nil {
		l.fresh = append(l.fresh, vg+"/"+name)
	}
	return l.LVM.GetLV(ctx, r, vg, name)
}

func newNodeEnv(t testing.TB) *nodeEnv {
	t.Helper()
	ctx := context.Background()
	fake := &namesLVM{LVM: lvmfake.New(1<<30, "vg0", "othervg")}
	m := lvmvol.NewManager(lvmvol.Config{LVM: fake, Wiper: fake, Node: testNode, VolumeGroups: []string{"vg0"}})
	devices := map[string]uint64{}
	for _, name := range []string{"pvc-a", "pvc-b", "pvc-c"} {
		v, err := m.CreateVolume(ctx, volume.CreateRequest{Name: name, VG: "vg0", RequiredBytes: 16 * mib})
		if err != nil {
			t.Fatal(err)
		}
		if name == "pvc-b" {
			continue
		}
		if _, err := m.PublishVolume(ctx, v.ID, testNode); err != nil {
			t.Fatal(err)
		}
		lv, _ := fake.LV("vg0", name)
		devices[v.DevicePath] = unix.Mkdev(uint32(lv.KernelMajor), uint32(lv.KernelMinor))
	}
	devices["/dev/vg0/pvc-c"] = unix.Mkdev(8, 0) // a disk, not the LV
	fake.Put(lvm.LV{Name: "plain", VGName: "vg0", Size: 4 * mib, Active: true, KernelMajor: 253, KernelMinor: 90})
	fake.Put(lvm.LV{Name: "x", VGName: "othervg", Size: 4 * mib, Active: true, KernelMajor: 253, KernelMinor: 91,
		Tags: []string{lvmvol.TagVolume}})
	devices["/dev/vg0/plain"] = unix.Mkdev(253, 90)
	devices["/dev/othervg/x"] = unix.Mkdev(253, 91)

	root := t.TempDir()
	pr, err := nodepath.NewRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	n := NewNode(NodeConfig{NodeID: testNode, PathRoot: pr}, m, nodefs.New(nil))
	n.waitDevice = func(_ context.Context, path string) (uint64, error) {
		if rdev, ok := devices[path]; ok {
			return rdev, nil
		}
		return 0, &fs.PathError{Op: "stat", Path: path, Err: syscall.ENOENT}
	}
	return &nodeEnv{n: n, lvm: fake, root: root}
}

func volID(vg, lv string) string { return testNode + "/" + vg + "/" + lv }

// wantErr checks the code a handler's error maps to (volume.CodeOf: the table).
func wantErr(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if got := volume.CodeOf(err); got != code {
		t.Errorf("%s: code %v (%v), want %v", what, got, err, code)
	}
}

// TestResolveDevice: only a published Carve volume of a served VG whose
// device node is its LV's turns into a device; names lvm refuses never
// reach lvm.
func TestResolveDevice(t *testing.T) {
	e := newNodeEnv(t)
	ctx := context.Background()
	dev, err := e.n.resolveDevice(ctx, lvm.Fresh, volID("vg0", "pvc-a"))
	if err != nil || dev.Path != "/dev/vg0/pvc-a" || dev.Rdev == 0 {
		t.Fatalf("pvc-a: %+v, %v", dev, err)
	}
	for id, want := range map[string]codes.Code{
		"fake-vol-id":                 codes.NotFound,
		"node-b/vg0/pvc-a":            codes.NotFound,
		volID("othervg", "x"):         codes.NotFound, // a VG this node does not serve
		volID("mapper", "vg0-pvc--a"): codes.NotFound,
		volID("vg0", "plain"):         codes.NotFound, // no Carve tag
		volID("vg0", "missing"):       codes.NotFound,
		volID(".", "vdc"):             codes.InvalidArgument,
		volID("..", "x"):              codes.InvalidArgument,
		volID("vg0", ".."):            codes.InvalidArgument,
		volID("vg0", "pool_tdata"):    codes.InvalidArgument, // a pool's hidden data LV
		volID("vg0", "lvol0_pmspare"): codes.InvalidArgument,
		volID("vg0", "-x"):            codes.InvalidArgument,
		volID("vg0", "pvc-b"):         codes.FailedPrecondition, // not published
		volID("vg0", "pvc-c"):         codes.FailedPrecondition, // device node is another device
	} {
		_, err := e.n.resolveDevice(ctx, lvm.Fresh, id)
		if got := volume.CodeOf(err); got != want {
			t.Errorf("%s: %v (%v), want %v", id, got, err, want)
		}
	}
	if len(e.lvm.invalid) > 0 {
		t.Errorf("names lvm refuses reached it: %v", e.lvm.invalid)
	}
}

func capMount(flags ...string) *csi.VolumeCapability {
	c := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	c.GetMount().MountFlags = flags
	return c
}

// TestNodeRefusesPaths: staging and target paths the CO could not mean,
// and mount flags no filesystem takes, are refused before anything is
// mounted or created.
func TestNodeRefusesPaths(t *testing.T) {
	e := newNodeEnv(t)
	ctx := context.Background()
	a := volID("vg0", "pvc-a")
	inRoot := filepath.Join(e.root, "staging")
	for _, p := range []string{"staging", e.root + "/../etc", "/etc", "/proc/sys", "/", e.root,
		e.root + "/x\ny", e.root + "/x/", e.root + "//x", e.root + "/" + strings.Repeat("n", 256)} {
		_, err := e.n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: a, StagingTargetPath: p, VolumeCapability: capMount()})
		wantErr(t, fmt.Sprintf("stage at %q", p), err, codes.InvalidArgument)
		_, err = e.n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: a, StagingTargetPath: inRoot,
			TargetPath: p, VolumeCapability: capMount()})
		wantErr(t, fmt.Sprintf("publish at %q", p), err, codes.InvalidArgument)
		_, err = e.n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: a, StagingTargetPath: p,
			TargetPath: filepath.Join(e.root, "t"), VolumeCapability: capMount()})
		wantErr(t, fmt.Sprintf("publish from staging %q", p), err, codes.InvalidArgument)
		_, err = e.n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: a, TargetPath: p})
		wantErr(t, fmt.Sprintf("unpublish %q", p), err, codes.InvalidArgument)
		_, err = e.n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: a, StagingTargetPath: p})
		wantErr(t, fmt.Sprintf("unstage %q", p), err, codes.InvalidArgument)
		_, err = e.n.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: a, VolumePath: p})
		wantErr(t, fmt.Sprintf("expand at %q", p), err, codes.InvalidArgument)
		_, err = e.n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: a, VolumePath: p})
		wantErr(t, fmt.Sprintf("stats at %q", p), err, codes.NotFound) // CSI's word for "not at this path"
	}
	for _, flag := range []string{"bind", "remount,ro", "rbind", "move", "noatime;id", "$(id)", "a\nb"} {
		_, err := e.n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: a, StagingTargetPath: inRoot, VolumeCapability: capMount(flag)})
		wantErr(t, fmt.Sprintf("stage with flag %q", flag), err, codes.InvalidArgument)
		_, err = e.n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: a, StagingTargetPath: inRoot,
			TargetPath: filepath.Join(e.root, "t"), VolumeCapability: capMount(flag)})
		wantErr(t, fmt.Sprintf("publish with flag %q", flag), err, codes.InvalidArgument)
	}
	_, err := e.n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: a, StagingTargetPath: inRoot,
		TargetPath: inRoot + "/sub", VolumeCapability: capMount()})
	wantErr(t, "target inside staging", err, codes.InvalidArgument)
	if entries, _ := os.ReadDir(e.root); len(entries) != 0 {
		t.Errorf("refused calls left %d entries in the root", len(entries))
	}
}

// TestUnpublishRemovesOnlyCarvesOwn: a target that is no mount is removed
// only when it is an empty directory or file inside the root, even for a
// volume that no longer exists (a CO retry); anything else stays.
func TestUnpublishRemovesOnlyCarvesOwn(t *testing.T) {
	e := newNodeEnv(t)
	ctx := context.Background()
	gone := volID("vg0", "deleted-long-ago")
	dir, file, full, content := filepath.Join(e.root, "dir"), filepath.Join(e.root, "file"),
		filepath.Join(e.root, "full"), filepath.Join(e.root, "content")
	for _, d := range []string{dir, full} {
		if err := os.Mkdir(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range map[string]string{file: "", filepath.Join(full, "keep"): "x", content: "data"} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(e.root, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]codes.Code{
		dir: codes.OK, file: codes.OK, filepath.Join(e.root, "never"): codes.OK,
		full: codes.FailedPrecondition, content: codes.FailedPrecondition, link: codes.InvalidArgument,
	} {
		_, err := e.n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: gone, TargetPath: path})
		wantErr(t, "unpublish "+path, err, want)
		_, statErr := os.Lstat(path)
		if removed := statErr != nil; removed != (want == codes.OK) {
			t.Errorf("%s: removed=%t after %v", path, removed, err)
		}
	}
	_, err := e.n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: gone, StagingTargetPath: content})
	wantErr(t, "unstage at a file", err, codes.FailedPrecondition)
	if _, err := os.Stat(content); err != nil {
		t.Errorf("unstage removed a file: %v", err)
	}
}

// TestStatsAndExpandNeedTheVolumesPath: an unmounted directory is no
// volume's, and a volume that is not here is NOT_FOUND first.
func TestStatsAndExpandNeedTheVolumesPath(t *testing.T) {
	e := newNodeEnv(t)
	ctx := context.Background()
	a := volID("vg0", "pvc-a")
	dir := filepath.Join(e.root, "dir")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	_, err := e.n.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: a, VolumePath: dir})
	wantErr(t, "expand at a plain directory", err, codes.FailedPrecondition)
	_, err = e.n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: a, VolumePath: dir})
	wantErr(t, "stats at a plain directory", err, codes.NotFound)
	_, err = e.n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: a, VolumePath: filepath.Join(e.root, "none")})
	wantErr(t, "stats at a missing path", err, codes.NotFound)
	_, err = e.n.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: "fake-vol-id-1", VolumePath: "some/path"})
	wantErr(t, "expand of an unknown volume", err, codes.NotFound)
}

// FuzzResolveDevice: any string either resolves to the one published
// Carve volume, or is refused as NOT_FOUND, INVALID_ARGUMENT or
// FAILED_PRECONDITION; and a VG/LV name lvm refuses never reaches lvm.
func FuzzResolveDevice(f *testing.F) {
	for _, s := range []string{volID("vg0", "pvc-a"), volID("othervg", "x"), volID(".", "vdc"), volID("..", "x"),
		volID("mapper", "vg0-pvc--a"), volID("vg0", "pool_tdata"), volID("vg0", "pvc-a/../x"), "fake-vol-id", "a//b"} {
		f.Add(s)
	}
	e := newNodeEnv(f)
	f.Fuzz(func(t *testing.T, id string) {
		dev, err := e.n.resolveDevice(context.Background(), lvm.Fresh, id)
		switch code := volume.CodeOf(err); {
		case err == nil:
			if id != volID("vg0", "pvc-a") || dev.Path != "/dev/vg0/pvc-a" {
				t.Fatalf("%q resolved to %+v", id, dev)
			}
		case code != codes.NotFound && code != codes.InvalidArgument && code != codes.FailedPrecondition:
			t.Fatalf("%q: %v (%v)", id, code, err)
		}
		if len(e.lvm.invalid) > 0 {
			t.Fatalf("%q: names lvm refuses reached it: %v", id, e.lvm.invalid)
		}
	})
}

// FuzzUnpublishPath: whatever target path the CO sends, NodeUnpublish
// never removes anything outside the root, nor a file with content or a
// non-empty directory inside it.
func FuzzUnpublishPath(f *testing.F) {
	e := newNodeEnv(f)
	outside := filepath.Join(filepath.Dir(e.root), "outside-"+filepath.Base(e.root))
	keep := []string{filepath.Join(outside, "empty"), filepath.Join(outside, "file"), filepath.Join(e.root, "content"),
		filepath.Join(e.root, "full", "x")}
	if err := os.MkdirAll(keep[0], 0o750); err != nil {
		f.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(keep[3]), 0o750); err != nil {
		f.Fatal(err)
	}
	for _, p := range keep[1:] {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			f.Fatal(err)
		}
	}
	f.Cleanup(func() { _ = os.RemoveAll(outside) })
	for _, s := range append(keep, e.root+"/../"+filepath.Base(outside)+"/empty", filepath.Join(e.root, "full"), "/", e.root) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, path string) {
		_, _ = e.n.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: volID("vg0", "gone"), TargetPath: path})
		for _, p := range keep {
			if _, err := os.Lstat(p); err != nil {
				t.Fatalf("unpublish of %q removed %s: %v", path, p, err)
			}
		}
	})
}

// TestNodeStageRereadsMkfsOptions: a volume context's mkfs options are
// read again at NodeStage (a static PV's context is whatever its author
// wrote): outside the set, or vetted for another filesystem than the one
// staged, is INVALID_ARGUMENT before anything is resolved, made or run.
func TestNodeStageRereadsMkfsOptions(t *testing.T) {
	e := newNodeEnv(t)
	ctx := context.Background()
	staging := filepath.Join(e.root, "staging")
	xfs := capMount()
	xfs.GetMount().FsType = "xfs"
	e.lvm.fresh = nil // the setup's
	for what, tc := range map[string]struct {
		cap *csi.VolumeCapability
		vc  map[string]string
	}{
		"outside the set": {capMount(), map[string]string{ParamMkfsOptions: "-E offset=4096"}},
		"a path":          {capMount(), map[string]string{ParamMkfsOptions: "-d /etc"}},
		"ext4's for xfs":  {xfs, map[string]string{ParamFsType: "ext4", ParamMkfsOptions: "-N 1000"}},
	} {
		_, err := e.n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: volID("vg0", "pvc-a"), StagingTargetPath: staging,
			VolumeCapability: tc.cap, VolumeContext: tc.vc})
		wantErr(t, what, err, codes.InvalidArgument)
	}
	if entries, _ := os.ReadDir(e.root); len(entries) != 0 {
		t.Errorf("refused stages left %d entries in the root", len(entries))
	}
	if len(e.lvm.fresh) != 0 {
		t.Errorf("refused stages read LVs: %v", e.lvm.fresh)
	}
}
