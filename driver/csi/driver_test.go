package csi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

const (
	testNode = "node-a"
	mib      = 1 << 20
)

// blockingLVM holds CreateLV until release is closed, to catch concurrency.
type blockingLVM struct {
	*lvmfake.LVM
	entered chan struct{}
	release chan struct{}
}

func (b *blockingLVM) CreateLV(ctx context.Context, o lvm.CreateLVOptions) (lvm.LV, error) {
	close(b.entered)
	<-b.release
	return b.LVM.CreateLV(ctx, o)
}

// serve starts the controller over a fake LVM on a real unix socket.
func serve(t testing.TB, l lvmvol.LVM, w lvmvol.Wiper) csi.ControllerClient {
	t.Helper()
	return csi.NewControllerClient(serveConn(t, l, w))
}

// serveConn is serve's connection, for the clients of every service.
func serveConn(t testing.TB, l lvmvol.LVM, w lvmvol.Wiper) *grpc.ClientConn {
	t.Helper()
	m := lvmvol.NewManager(lvmvol.Config{LVM: l, Wiper: w, Node: testNode, VolumeGroups: []string{"vg0"}})
	srv := NewServer(NewIdentity("test", true, m), NewController(m), nil, NewSnapshotMetadata(m))
	sock := filepath.Join(t.TempDir(), "csi.sock")
	done := make(chan error, 1)
	go func() { done <- srv.Serve("unix://" + sock) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true))) // the server may not listen yet
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return conn
}

func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	}
}

func createReq(name string, size int64, params map[string]string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		Parameters:         params,
	}
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Errorf("%s: code %v (%v), want %v", what, got, err, code)
	}
}

func TestCreateVolumeCodes(t *testing.T) {
	f := lvmfake.New(100*mib, "vg0")
	c := serve(t, f, f)
	ctx := context.Background()

	resp, err := c.CreateVolume(ctx, createReq("pvc-1", 5*mib, nil))
	if err != nil {
		t.Fatal(err)
	}
	v := resp.GetVolume()
	if v.GetVolumeId() != "node-a/vg0/pvc-1" || v.GetCapacityBytes() != 8*mib {
		t.Errorf("volume %v, want node-a/vg0/pvc-1 of 8 MiB", v)
	}
	if got := v.GetAccessibleTopology()[0].GetSegments()[TopologyKey]; got != testNode {
		t.Errorf("topology %q, want %q", got, testNode)
	}
	if v.GetVolumeContext()[ParamFsType] != "ext4" {
		t.Errorf("context %v, want default fsType ext4", v.GetVolumeContext())
	}

	multi := createReq("pvc-2", mib, nil)
	multi.VolumeCapabilities = []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}
	noCaps := createReq("pvc-2", mib, nil)
	noCaps.VolumeCapabilities = nil
	for what, tc := range map[string]struct {
		req  *csi.CreateVolumeRequest
		code codes.Code
	}{
		"no name":          {createReq("", mib, nil), codes.InvalidArgument},
		"no capabilities":  {noCaps, codes.InvalidArgument},
		"multi-node":       {multi, codes.InvalidArgument},
		"unknown param":    {createReq("pvc-2", mib, map[string]string{"volumegroup": "vg0"}), codes.InvalidArgument},
		"unserved VG":      {createReq("pvc-2", mib, map[string]string{"volumeGroup": "vg9"}), codes.InvalidArgument},
		"bad fsType":       {createReq("pvc-2", mib, map[string]string{"fsType": "ntfs"}), codes.InvalidArgument},
		"no space":         {createReq("pvc-2", 500*mib, nil), codes.ResourceExhausted},
		"same name bigger": {createReq("pvc-1", 20*mib, nil), codes.AlreadyExists},
		"same name, xfs":   {createReq("pvc-1", 5*mib, map[string]string{"fsType": "xfs"}), codes.AlreadyExists},
		// Standalone mode keeps no record beyond the LV to recreate from.
		"recreate in standalone": {createReq("pvc-2", mib, map[string]string{ParamRecreateBlankWhenLost: "true"}), codes.InvalidArgument},
		"several VGs, none here": {createReq("pvc-2", mib, map[string]string{ParamVolumeGroups: "vg8,vg9"}), codes.ResourceExhausted},
		"claim no name can be":   {createReq("pvc-2", mib, map[string]string{volume.ParamClaimName: "a/b", volume.ParamClaimNamespace: "ns"}), codes.InvalidArgument},
	} {
		_, err := c.CreateVolume(ctx, tc.req)
		wantCode(t, what, err, tc.code)
	}
	// Metadata the provisioner adds does not change the volume's identity.
	again := createReq("pvc-1", 5*mib, map[string]string{"csi.storage.k8s.io/pvc/name": "data"})
	if _, err := c.CreateVolume(ctx, again); err != nil {
		t.Errorf("idempotent create with CO metadata: %v", err)
	}
}

func TestPublishDeleteCodes(t *testing.T) {
	f := lvmfake.New(100*mib, "vg0")
	c := serve(t, f, f)
	ctx := context.Background()
	resp, err := c.CreateVolume(ctx, createReq("pvc-1", 4*mib, nil))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetVolume().GetVolumeId()
	vc := mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	pub := func(vol, node string) (*csi.ControllerPublishVolumeResponse, error) {
		return c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: vol, NodeId: node, VolumeCapability: vc})
	}
	_, err = pub(id, "node-b")
	wantCode(t, "publish to unknown node", err, codes.NotFound)
	_, err = pub("fake-vol-id", testNode)
	wantCode(t, "publish foreign id", err, codes.NotFound)
	_, err = pub("", testNode)
	wantCode(t, "publish without id", err, codes.InvalidArgument)
	r, err := pub(id, testNode)
	if err != nil || r.GetPublishContext()[publishDeviceKey] != "/dev/vg0/pvc-1" {
		t.Fatalf("publish = %v, %v", r, err)
	}
	_, err = c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	wantCode(t, "delete published", err, codes.FailedPrecondition)
	f.SetOpen("vg0", "pvc-1", true)
	_, err = c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: testNode})
	wantCode(t, "unpublish open", err, codes.FailedPrecondition)
	f.SetOpen("vg0", "pvc-1", false)
	if _, err := c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: testNode}); err != nil {
		t.Fatal(err)
	}
	for _, vol := range []string{id, id, "fake-vol-id"} {
		if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol}); err != nil {
			t.Errorf("delete %s: %v, want success (idempotent)", vol, err)
		}
	}
}

func TestListVolumesPages(t *testing.T) {
	f := lvmfake.New(100*mib, "vg0")
	c := serve(t, f, f)
	ctx := context.Background()
	for _, n := range []string{"c", "a", "b", "d", "e"} {
		if _, err := c.CreateVolume(ctx, createReq("pvc-"+n, 4*mib, nil)); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	token := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		resp, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetEntries()) > 2 {
			t.Errorf("page of %d entries, max 2", len(resp.GetEntries()))
		}
		for _, e := range resp.GetEntries() {
			seen = append(seen, strings.TrimPrefix(e.GetVolume().GetVolumeId(), "node-a/vg0/pvc-"))
		}
		if token = resp.GetNextToken(); token == "" {
			break
		}
	}
	if strings.Join(seen, "") != "abcde" {
		t.Errorf("listed %v, want a..e once each in order", seen)
	}
	_, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "zzz"})
	wantCode(t, "bad token", err, codes.Aborted)
	capy, err := c.GetCapacity(ctx, &csi.GetCapacityRequest{})
	if err != nil || capy.GetAvailableCapacity() != 80*mib || capy.GetMaximumVolumeSize().GetValue() != 80*mib {
		t.Errorf("capacity = %v, %v; want 80 MiB", capy, err)
	}
	other, err := c.GetCapacity(ctx, &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: map[string]string{TopologyKey: "node-b"}}})
	if err != nil || other.GetAvailableCapacity() != 0 {
		t.Errorf("capacity of another node = %v, %v; want 0", other, err)
	}
}

func TestConcurrentCallOnSameVolumeIsAborted(t *testing.T) {
	b := &blockingLVM{LVM: lvmfake.New(100*mib, "vg0"), entered: make(chan struct{}), release: make(chan struct{})}
	c := serve(t, b, b.LVM)
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(1)
	var firstErr error
	go func() {
		defer wg.Done()
		_, firstErr = c.CreateVolume(ctx, createReq("pvc-1", 4*mib, nil))
	}()
	<-b.entered
	_, err := c.CreateVolume(ctx, createReq("pvc-1", 4*mib, nil))
	wantCode(t, "second create while the first runs", err, codes.Aborted)
	// Read-only calls never wait on the lock.
	if _, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{}); err != nil {
		t.Errorf("list while a create runs: %v", err)
	}
	close(b.release)
	wg.Wait()
	if firstErr != nil {
		t.Errorf("first create: %v", firstErr)
	}
}

// TestSocketIsNotWorldAccessible: whoever can connect can delete volumes,
// so the CSI socket lets in its owner and group only.
func TestSocketIsNotWorldAccessible(t *testing.T) {
	srv := NewServer(NewIdentity("test", true, nil), nil, nil, nil)
	sock := filepath.Join(t.TempDir(), "csi.sock")
	done := make(chan error, 1)
	go func() { done <- srv.Serve("unix://" + sock) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := csi.NewIdentityClient(conn).GetPluginInfo(context.Background(), &csi.GetPluginInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm()&0o007 != 0 {
		t.Errorf("CSI socket %v, %v: want no access for others", fi.Mode(), err)
	}
	srv.Stop()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// An encrypted volume's context says so (NodeStage checks it against the
// LV); it is raised for its LUKS2 header; a raw block one is refused
// before any LV is made.
func TestCreateEncryptedVolume(t *testing.T) {
	f := lvmfake.New(100*mib, "vg0")
	c := serve(t, f, f)
	ctx := context.Background()
	resp, err := c.CreateVolume(ctx, createReq("pvc-enc", 5*mib, map[string]string{ParamEncryption: EncryptionLUKS2}))
	if err != nil {
		t.Fatal(err)
	}
	if vc := resp.GetVolume().GetVolumeContext(); vc[ParamEncryption] != EncryptionLUKS2 {
		t.Errorf("context %v, want %s=%s", vc, ParamEncryption, EncryptionLUKS2)
	}
	if got := resp.GetVolume().GetCapacityBytes(); got < volume.MinEncryptedSize("ext4") || got < 32*mib {
		t.Errorf("encrypted volume of %d bytes: no room for its header and filesystem", got)
	}
	plain, err := c.CreateVolume(ctx, createReq("pvc-plain", 5*mib, map[string]string{ParamEncryption: EncryptionNone}))
	if err != nil || plain.GetVolume().GetVolumeContext()[ParamEncryption] != "" {
		t.Errorf("plain volume: %v, %v", plain, err)
	}
	block := createReq("pvc-enc-block", 5*mib, map[string]string{ParamEncryption: EncryptionLUKS2})
	block.VolumeCapabilities = []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}
	_, err = c.CreateVolume(ctx, block)
	wantCode(t, "encrypted raw block volume", err, codes.InvalidArgument)
	if _, ok := f.LV("vg0", "pvc-enc-block"); ok {
		t.Error("the refused block volume has an LV")
	}
}

// TestCreateVolumeMkfsOptions: a class's mkfs options are read for the
// filesystem the volume gets (a capability's fs_type wins over the class's
// fsType) before any LV is made, and reach NodeStage in the volume context.
func TestCreateVolumeMkfsOptions(t *testing.T) {
	f := lvmfake.New(100*mib, "vg0")
	c := serve(t, f, f)
	ctx := context.Background()
	resp, err := c.CreateVolume(ctx, createReq("pvc-mkfs", 5*mib, map[string]string{ParamMkfsOptions: " -N  20000 -E lazy_itable_init=0 "}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetVolume().GetVolumeContext()[ParamMkfsOptions]; got != "-N 20000 -E lazy_itable_init=0" {
		t.Errorf("volume context's %s = %q", ParamMkfsOptions, got)
	}
	plain, err := c.CreateVolume(ctx, createReq("pvc-plain", 5*mib, nil))
	if _, has := plain.GetVolume().GetVolumeContext()[ParamMkfsOptions]; err != nil || has {
		t.Errorf("a class without options: %v, %v", plain.GetVolume().GetVolumeContext(), err)
	}

	xfsCap := createReq("pvc-xfs-cap", 5*mib, map[string]string{ParamMkfsOptions: "-N 20000"})
	xfsCap.VolumeCapabilities[0].GetMount().FsType = "xfs"
	for what, req := range map[string]*csi.CreateVolumeRequest{
		"outside the set":          createReq("pvc-bad-1", 5*mib, map[string]string{ParamMkfsOptions: "-J device=/dev/sdb"}),
		"bad value":                createReq("pvc-bad-2", 5*mib, map[string]string{ParamMkfsOptions: "-b 3000"}),
		"ext4's option for xfs":    createReq("pvc-bad-3", 5*mib, map[string]string{ParamFsType: "xfs", ParamMkfsOptions: "-N 20000"}),
		"for the capability's xfs": xfsCap,
	} {
		_, err := c.CreateVolume(ctx, req)
		wantCode(t, what, err, codes.InvalidArgument)
		if _, ok := f.LV("vg0", req.GetName()); ok {
			t.Errorf("%s: the refused volume has an LV", what)
		}
	}
}
