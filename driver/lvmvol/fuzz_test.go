package lvmvol_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// checkedLVM is the fake with lvm's own checks of lvcreate's options and
// of snapshot names and tags in front, as the real client has: what it
// refuses never reaches lvm2.
type checkedLVM struct{ *lvmfake.LVM }

func (c checkedLVM) CreateLV(ctx context.Context, o lvm.CreateLVOptions) (lvm.LV, error) {
	if err := o.Validate(); err != nil {
		return lvm.LV{}, err
	}
	return c.LVM.CreateLV(ctx, o)
}

func (c checkedLVM) CreateThinSnapshot(ctx context.Context, vg, origin, name string, tags ...string) (lvm.LV, error) {
	if err := (lvm.CreateLVOptions{VG: vg, Name: name, Size: 1, Tags: tags}).Validate(); err != nil {
		return lvm.LV{}, err
	}
	return c.LVM.CreateThinSnapshot(ctx, vg, origin, name, tags...)
}

func (c checkedLVM) CreateCOWSnapshot(ctx context.Context, vg, origin, name string, cowSize uint64, tags ...string) (lvm.LV, error) {
	if err := (lvm.CreateLVOptions{VG: vg, Name: name, Size: 1, Tags: tags}).Validate(); err != nil {
		return lvm.LV{}, err
	}
	return c.LVM.CreateCOWSnapshot(ctx, vg, origin, name, cowSize, tags...)
}

// state is the fake's LVs of vg0: names, sizes, tags and activation.
func state(t *testing.T, f *lvmfake.LVM) []string {
	t.Helper()
	lvs, err := f.ListLVs(context.Background(), lvm.Fresh, vg)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, lv := range lvs {
		out = append(out, fmt.Sprintf("%s %d %v %t", lv.Name, lv.Size, lv.Tags, lv.Active))
	}
	slices.Sort(out)
	return out
}

// fuzzRig: a VG of 100 MiB with a thin pool and a thin and a thick volume
// to copy from, behind lvm's checks.
func fuzzRig(t *testing.T) (*lvmvol.Manager, *lvmfake.LVM) {
	t.Helper()
	f := lvmfake.New(100*mib, vg)
	f.PutThinPool(vg, "pool", 40*mib, 0)
	m := lvmvol.NewManager(lvmvol.Config{LVM: checkedLVM{f}, Wiper: f, Node: node, VolumeGroups: []string{vg}, Copier: f})
	for _, r := range []volume.CreateRequest{
		{Name: "thin-src", VG: vg, RequiredBytes: 8 * mib, Type: volume.Type{ThinPool: "pool"}, ParamsDigest: "d"},
		{Name: "thick-src", VG: vg, RequiredBytes: 4 * mib, ParamsDigest: "d"},
	} {
		if _, err := m.CreateVolume(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return m, f
}

// within runs fn, failing the test if it takes more than 5 s.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return in 5 s", what)
	}
}

// refusalCodes are the codes a malformed or unsatisfiable request may get:
// never INTERNAL, which would tell the CO that Carve failed, not the
// request.
var refusalCodes = []codes.Code{codes.InvalidArgument, codes.NotFound, codes.OutOfRange, codes.ResourceExhausted,
	codes.FailedPrecondition, codes.AlreadyExists}

// FuzzCreateVolume: a volume's creation request as a LogicalVolume's spec
// carries it to the node agent (name, VG, sizes, type, source, parameter
// digest: the API server checks only their schema), here without the API
// server the agent's own fuzz target needs. Whatever it holds, the manager
// refuses it with a code that blames the request and changes no LV, or
// carves one LV named after the name (volume.LVName), in the served VG,
// no smaller than asked and within the limit, with tags lvm2 takes.
func FuzzCreateVolume(f *testing.F) {
	f.Add("pvc-1", vg, int64(8<<20), int64(0), "", 0, 0, int64(0), "", "", "d")
	f.Add("pvc-2", vg, int64(8<<20), int64(16<<20), "pool", 0, 0, int64(0), "", "", "d")
	f.Add("pvc-3", vg, int64(4<<20), int64(0), "", 2, 0, int64(64<<10), "", "", "d")
	f.Add("pvc-4", vg, int64(4<<20), int64(0), "", 0, 1, int64(0), "", "", "d")
	f.Add("restore", "", int64(8<<20), int64(0), "", 0, 0, int64(0), node+"/"+vg+"/thin-src", "volume", "d")
	f.Add("clone", vg, int64(1), int64(0), "", 0, 0, int64(0), node+"/"+vg+"/thick-src", "volume", "d")
	f.Add("a b/../c", vg, int64(-1), int64(-5), "", 2, 1, int64(-4096), node+"/"+vg+"/x", "volume", "d")
	f.Add("pvc-5", "../vg0", int64(1), int64(1), "pool/../x", 1<<30, -1, int64(1)<<62, "n//", "snapshot", "d")
	f.Add("pvc-6", vg, int64(1)<<62, int64(0), "", 0, 0, int64(0), "", "", "d")
	f.Add("pvc-7", vg, int64(8<<20), int64(8<<20-1), "", 0, 0, int64(0), "", "", "d")
	f.Add("pvc-8", vg, int64(8<<20), int64(0), "", 0, 0, int64(0), "", "", "a b,c")
	f.Add("$(reboot)", vg, int64(8<<20), int64(0), "thin-src", 0, 0, int64(0), "", "", "")
	f.Fuzz(func(t *testing.T, name, vgName string, required, limit int64, pool string, stripes, mirrors int, stripeSize int64,
		source, kind, digest string) {
		m, fake := fuzzRig(t)
		req := volume.CreateRequest{Name: name, VG: vgName, RequiredBytes: required, LimitBytes: limit, ParamsDigest: digest,
			Type: volume.Type{ThinPool: pool, Stripes: stripes, StripeSize: uint64(max(stripeSize, 0)), Mirrors: mirrors}}
		if source != "" {
			id, err := volume.ParseID(source)
			if err != nil {
				return // the agent reports it; FuzzParseID covers it
			}
			req.Source = &volume.ContentSource{Kind: kind, ID: id}
		}
		before := state(t, fake)
		var vol volume.Volume
		var err error
		within(t, fmt.Sprintf("CreateVolume(%+v)", req), func() { vol, err = m.CreateVolume(context.Background(), req) })
		after := state(t, fake)
		if err != nil {
			if !slices.Equal(before, after) {
				t.Fatalf("%+v refused (%v) but LVM changed:\n%v\n->\n%v", req, err, before, after)
			}
			if code := volume.CodeOf(err); !slices.Contains(refusalCodes, code) {
				t.Fatalf("%+v: code %v (%v)", req, code, err)
			}
			return
		}
		switch {
		case vol.ID != (volume.ID{Node: node, VG: vg, LV: volume.LVName(name)}):
			t.Fatalf("%+v: carved %s", req, vol.ID)
		case vol.SizeBytes < required || (limit > 0 && vol.SizeBytes > limit):
			t.Fatalf("%+v: %d bytes", req, vol.SizeBytes)
		case len(after) != len(before)+1:
			t.Fatalf("%+v: LVs %v -> %v", req, before, after)
		}
		lv, ok := fake.LV(vg, vol.ID.LV)
		if !ok || lv.Active || !lv.HasTag(lvmvol.TagVolume) || lv.PoolLV != pool {
			t.Fatalf("%+v: LV %+v", req, lv)
		}
	})
}

// FuzzCreateSnapshot: a snapshot as a LogicalVolumeSnapshot's spec
// carries it to the node agent (the name, and the source volume's ID as a
// string). A refusal blames the request and changes no LV; a snapshot
// taken is one new LV in the source's VG, named after the snapshot name
// (volume.SnapshotLVName), of the asked source.
func FuzzCreateSnapshot(f *testing.F) {
	for _, src := range []string{node + "/" + vg + "/thin-src", node + "/" + vg + "/thick-src", node + "/" + vg + "/pool",
		"node-b/" + vg + "/thin-src", node + "/vg1/thin-src", node + "/../thin-src", node + "/" + vg + "/snap-x", "a//b"} {
		f.Add("snap-1", src)
	}
	f.Add("", node+"/"+vg+"/thin-src")
	f.Add("x y;$(reboot)", node+"/"+vg+"/thin-src")
	f.Add(strings.Repeat("s", 300), node+"/"+vg+"/thick-src")
	f.Fuzz(func(t *testing.T, name, source string) {
		src, err := volume.ParseID(source)
		if err != nil {
			return // the agent reports it; FuzzParseID covers it
		}
		m, fake := fuzzRig(t)
		before := state(t, fake)
		var snap volume.Snapshot
		within(t, fmt.Sprintf("CreateSnapshot(%q, %s)", name, src), func() { snap, err = m.CreateSnapshot(context.Background(), name, src) })
		after := state(t, fake)
		if err != nil {
			if !slices.Equal(before, after) {
				t.Fatalf("%q of %s refused (%v) but LVM changed:\n%v\n->\n%v", name, src, err, before, after)
			}
			if code := volume.CodeOf(err); !slices.Contains(refusalCodes, code) && code != codes.Aborted {
				t.Fatalf("%q of %s: code %v (%v)", name, src, code, err)
			}
			return
		}
		switch {
		case src.Node != node || src.VG != vg || (src.LV != "thin-src" && src.LV != "thick-src"):
			t.Fatalf("snapshot of %s taken: %+v", src, snap)
		case snap.ID != (volume.ID{Node: node, VG: vg, LV: volume.SnapshotLVName(name)}) || snap.Source != src:
			t.Fatalf("%q of %s: %+v", name, src, snap)
		case !slices.ContainsFunc(after, func(s string) bool { return strings.HasPrefix(s, snap.ID.LV+" ") }):
			t.Fatalf("%q of %s: no LV %s in %v", name, src, snap.ID.LV, after)
		}
	})
}
