package csi

import (
	"context"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
	"carve.dev/carve/test/snapmeta"
)

const chunk = lvmfake.ThinChunk

// metaScene is a thin volume and a thick one on a fake LVM, served with
// the SnapshotMetadata service.
type metaScene struct {
	f    *lvmfake.LVM
	c    csi.ControllerClient
	m    csi.SnapshotMetadataClient
	id   csi.IdentityClient
	thin string // the thin volume's ID
}

func newMetaScene(t *testing.T) *metaScene {
	t.Helper()
	f := lvmfake.New(2048*mib, "vg0")
	f.PutThinPool("vg0", "pool", 1024*mib, 0)
	conn := serveConn(t, f, f)
	s := &metaScene{f: f, c: csi.NewControllerClient(conn), m: csi.NewSnapshotMetadataClient(conn), id: csi.NewIdentityClient(conn)}
	vol, err := s.c.CreateVolume(context.Background(), createReq("pvc-thin", 256*mib, map[string]string{ParamThinPool: "pool"}))
	if err != nil {
		t.Fatal(err)
	}
	s.thin = vol.GetVolume().GetVolumeId()
	return s
}

// write writes length bytes at offset of volume id, as the pool maps them.
func (s *metaScene) write(id string, offset, length uint64) {
	s.f.WriteThin("vg0", path.Base(id), offset, length)
}

func (s *metaScene) snapshot(t *testing.T, name, source string) string {
	t.Helper()
	r, err := s.c.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: source})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetSnapshot().GetSnapshotId()
}

func ranges(rs ...snapmeta.Range) []snapmeta.Range { return rs }

func TestSnapshotMetadataAdvertised(t *testing.T) {
	s := newMetaScene(t)
	caps, err := s.id.GetPluginCapabilities(context.Background(), &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(caps.GetCapabilities(), func(c *csi.PluginCapability) bool {
		return c.GetService().GetType() == csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE
	}) {
		t.Errorf("SNAPSHOT_METADATA_SERVICE not advertised: %v", caps.GetCapabilities())
	}
	// A server without the service does not advertise it.
	id := NewIdentity("test", true, nil)
	NewServer(id, nil, nil, nil)
	caps, _ = id.GetPluginCapabilities(context.Background(), &csi.GetPluginCapabilitiesRequest{})
	for _, c := range caps.GetCapabilities() {
		if c.GetService().GetType() == csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE {
			t.Error("advertised without the service registered")
		}
	}
}

func TestSnapshotMetadataThin(t *testing.T) {
	s := newMetaScene(t)
	ctx := context.Background()
	s.write(s.thin, 0, 4096)             // chunk 0
	s.write(s.thin, 3*chunk-4096, 8192)  // chunks 2 and 3
	s.write(s.thin, 100*chunk, 10*chunk) // chunks 100-109
	a := s.snapshot(t, "a", s.thin)
	s.write(s.thin, 2*chunk, 1)      // chunk 2 again
	s.write(s.thin, 200*chunk, 4096) // chunk 200, new
	b := s.snapshot(t, "b", s.thin)

	got, err := snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := ranges(snapmeta.Range{Offset: 0, Length: chunk}, snapmeta.Range{Offset: 2 * chunk, Length: 2 * chunk},
		snapmeta.Range{Offset: 100 * chunk, Length: 10 * chunk})
	if !slices.Equal(got.Ranges, want) || got.Capacity != 256*mib || got.Type != csi.BlockMetadataType_VARIABLE_LENGTH || got.Messages != 1 {
		t.Errorf("allocated of a: %+v, want %v in one VARIABLE_LENGTH message of capacity 256 MiB", got, want)
	}

	got, err = snapmeta.Delta(ctx, s.m, a, b, snapmeta.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want = ranges(snapmeta.Range{Offset: 2 * chunk, Length: chunk}, snapmeta.Range{Offset: 200 * chunk, Length: chunk})
	if !slices.Equal(got.Ranges, want) || got.Capacity != 256*mib {
		t.Errorf("delta a..b: %+v, want %v", got, want)
	}

	// Nothing changed: one message without tuples, which tells the
	// capacity.
	got, err = snapmeta.Delta(ctx, s.m, b, b, snapmeta.Options{})
	if err != nil || len(got.Ranges) != 0 || got.Messages != 1 || got.Capacity != 256*mib {
		t.Errorf("delta b..b: %+v, %v; want one empty message", got, err)
	}
}

func TestSnapshotMetadataPages(t *testing.T) {
	s := newMetaScene(t)
	ctx := context.Background()
	for c := uint64(0); c < 3000; c += 2 { // 1500 runs of one chunk
		s.write(s.thin, c*chunk, 1)
	}
	a := s.snapshot(t, "a", s.thin)

	// max_results 0 and above the bound: messages of maxTuplesPerMessage.
	for _, max := range []int32{0, 5000} {
		got, err := snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{MaxResults: max})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Ranges) != 1500 || !slices.Equal(got.Sizes, []int{maxTuplesPerMessage, 1500 - maxTuplesPerMessage}) {
			t.Errorf("max_results %d: %d ranges in messages of %v", max, len(got.Ranges), got.Sizes)
		}
	}
	// A small max_results: every message holds at most that many.
	got, err := snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{MaxResults: 7})
	if err != nil || len(got.Ranges) != 1500 || got.Messages != 215 {
		t.Errorf("max_results 7: %d ranges in %d messages, %v; want 1500 in 215", len(got.Ranges), got.Messages, err)
	}

	// starting_offset inside a range: that range is cut to start there;
	// at a range's end: the next range first.
	from := int64(1000*chunk + 100)
	got, err = snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{From: from, MaxResults: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Ranges) != 1000 || got.Ranges[0] != (snapmeta.Range{Offset: from, Length: chunk - 100}) ||
		got.Ranges[1] != (snapmeta.Range{Offset: 1002 * chunk, Length: chunk}) {
		t.Errorf("from %d: %d ranges from %v", from, len(got.Ranges), got.Ranges[:2])
	}
	got, err = snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{From: 1001 * chunk})
	if err != nil || got.Ranges[0].Offset != 1002*chunk {
		t.Errorf("from a range's end: first %v, %v", got.Ranges[0], err)
	}

	// The size itself: nothing left, one empty message. Past it, or
	// negative: OUT_OF_RANGE, as the spec says.
	got, err = snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{From: 256 * mib})
	if err != nil || len(got.Ranges) != 0 || got.Messages != 1 {
		t.Errorf("from the size: %+v, %v", got, err)
	}
	for _, from := range []int64{256*mib + 1, -1} {
		_, err = snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{From: from})
		wantCode(t, "starting_offset out of range", err, codes.OutOfRange)
		_, err = snapmeta.Delta(ctx, s.m, a, a, snapmeta.Options{From: from})
		wantCode(t, "delta's starting_offset out of range", err, codes.OutOfRange)
	}
	_, err = snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{MaxResults: -1})
	wantCode(t, "negative max_results", err, codes.InvalidArgument)

	// Read in bounded memory: each message's tuples as they come.
	n := 0
	_, err = snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{MaxResults: 100, Each: func(rs []snapmeta.Range) error {
		n += len(rs)
		return nil
	}})
	if err != nil || n != 1500 {
		t.Errorf("streamed %d ranges, %v", n, err)
	}
}

func TestSnapshotMetadataThick(t *testing.T) {
	s := newMetaScene(t)
	ctx := context.Background()
	// Two ready thick snapshots (copies: the fake has no devices to copy).
	thick := func(name string) string {
		s.f.Put(lvm.LV{Name: name, VGName: "vg0", Size: 8 * mib, Tags: []string{"carve.dev/snapshot", "carve.dev/source=pvc-thick"}})
		return testNode + "/vg0/" + name
	}
	a, b := thick("ta"), thick("tb")
	// A full copy: all of it allocated, from any offset.
	got, err := snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{})
	if err != nil || !slices.Equal(got.Ranges, ranges(snapmeta.Range{Offset: 0, Length: 8 * mib})) || got.Capacity != 8*mib {
		t.Errorf("thick allocated: %+v, %v", got, err)
	}
	got, err = snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{From: 3 * mib})
	if err != nil || !slices.Equal(got.Ranges, ranges(snapmeta.Range{Offset: 3 * mib, Length: 5 * mib})) {
		t.Errorf("thick allocated from 3 MiB: %+v, %v", got, err)
	}
	// Their delta is not recorded anywhere: FAILED_PRECONDITION, the
	// spec's "changed block tracking is not enabled".
	_, err = snapmeta.Delta(ctx, s.m, a, b, snapmeta.Options{})
	wantCode(t, "thick delta", err, codes.FailedPrecondition)
	if !strings.Contains(err.Error(), "full backup") {
		t.Errorf("thick delta's error does not say what to do: %v", err)
	}

	// A copy still running; a snapshot of an encrypted volume.
	s.f.Put(lvm.LV{Name: "copying", VGName: "vg0", Size: 8 * mib, Tags: []string{"carve.dev/snapshot", "carve.dev/source=pvc-thick", "carve.dev/copying"}})
	s.f.Put(lvm.LV{Name: "sealed", VGName: "vg0", Size: 8 * mib, PoolLV: "pool",
		Tags: []string{"carve.dev/snapshot", "carve.dev/source=pvc-enc", "carve.dev/encrypted"}})
	for _, lvName := range []string{"copying", "sealed"} {
		_, err = snapmeta.Allocated(ctx, s.m, testNode+"/vg0/"+lvName, snapmeta.Options{})
		wantCode(t, lvName, err, codes.FailedPrecondition)
	}
}

func TestSnapshotMetadataRefusals(t *testing.T) {
	s := newMetaScene(t)
	ctx := context.Background()
	a := s.snapshot(t, "a", s.thin)
	other, err := s.c.CreateVolume(ctx, createReq("pvc-other", 256*mib, map[string]string{ParamThinPool: "pool"}))
	if err != nil {
		t.Fatal(err)
	}
	o := s.snapshot(t, "o", other.GetVolume().GetVolumeId())
	for _, tc := range []struct {
		name, base, target string
		code               codes.Code
	}{
		{"empty", "", a, codes.InvalidArgument},
		{"empty target", a, "", codes.InvalidArgument},
		{"malformed", "nope", a, codes.NotFound},
		{"traversal", a, testNode + "/vg0/..", codes.NotFound},
		{"another node", "node-b/vg0/" + path.Base(a), a, codes.NotFound},
		{"unknown", testNode + "/vg0/snapshot-missing", a, codes.NotFound},
		{"a volume, not a snapshot", s.thin, a, codes.NotFound},
		{"a VG not served", testNode + "/vg9/" + path.Base(a), a, codes.NotFound},
		{"another volume's snapshot", a, o, codes.InvalidArgument},
	} {
		_, err := snapmeta.Delta(ctx, s.m, tc.base, tc.target, snapmeta.Options{})
		wantCode(t, "delta: "+tc.name, err, tc.code)
		if tc.target == a {
			_, err = snapmeta.Allocated(ctx, s.m, tc.base, snapmeta.Options{})
			wantCode(t, "allocated: "+tc.name, err, tc.code)
		}
	}
	// A base made after its target.
	s.f.Put(lvm.LV{Name: "early", VGName: "vg0", Size: 256 * mib, PoolLV: "pool",
		Tags: []string{"carve.dev/snapshot", "carve.dev/source=pvc-thin", "carve.dev/created=1000"}})
	_, err = snapmeta.Delta(ctx, s.m, a, testNode+"/vg0/early", snapmeta.Options{})
	wantCode(t, "base newer than target", err, codes.InvalidArgument)
	if _, err := snapmeta.Delta(ctx, s.m, testNode+"/vg0/early", a, snapmeta.Options{}); err != nil {
		t.Errorf("older base: %v", err)
	}
}

func TestSnapshotDeletedMidStream(t *testing.T) {
	s := newMetaScene(t)
	ctx := context.Background()
	for c := uint64(0); c < 20; c += 2 {
		s.write(s.thin, c*chunk, 1)
	}
	a := s.snapshot(t, "a", s.thin)
	sent := 0
	s.f.OnThinRange = func() {
		if sent++; sent == 4 {
			if _, err := s.c.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: a}); err != nil {
				t.Errorf("DeleteSnapshot mid-stream: %v", err)
			}
		}
	}
	got, err := snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{MaxResults: 1})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("stream of a snapshot deleted mid-way: %v, want NOT_FOUND saying so", err)
	}
	if len(got.Ranges) != 3 {
		t.Errorf("%d ranges before the deletion, want 3", len(got.Ranges))
	}
	s.f.OnThinRange = nil
	_, err = snapmeta.Allocated(ctx, s.m, a, snapmeta.Options{})
	wantCode(t, "after the deletion", err, codes.NotFound)
	// The stream did not hold the deletion up, nor does the next one
	// refuse the name's new snapshot.
	b := s.snapshot(t, "a", s.thin)
	if got, err := snapmeta.Allocated(ctx, s.m, b, snapmeta.Options{}); err != nil || len(got.Ranges) != 10 {
		t.Errorf("a new snapshot of the name: %+v, %v", got, err)
	}
}
