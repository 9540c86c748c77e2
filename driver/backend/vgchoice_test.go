package backend

import (
	"testing"

	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// TestSeveralVGsThroughResources: in cluster mode the controller picks
// a class's VG from the node's report, the LogicalVolume records the pick
// and a retry keeps it though the report changed since, and capacity
// adds the VGs up as standalone mode does.
func TestSeveralVGsThroughResources(t *testing.T) {
	var m *lvmvol.Manager
	b, f := clusterWith(t, func(cfg *lvmvol.Config, f *lvmfake.LVM) {
		f.AddVG("vg1", 100*mib)
		f.SetVGTags("vg1", "fast")
		cfg.VolumeGroups = []string{"vg0", "vg1"}
		m = lvmvol.NewManager(*cfg)
	})
	ctx := within(t)
	rep := &agent.StorageReporter{Client: b.Client, Node: "node-a", Space: m.Space}
	report := func() {
		t.Helper()
		if err := rep.Report(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.CreateLV(ctx, lvm.CreateLVOptions{VG: "vg0", Name: "filler", Size: 40 * mib}); err != nil {
		t.Fatal(err)
	}
	report()
	both := volume.VGChoice{Names: []string{"vg0", "vg1"}}
	choice := func(name string, c volume.VGChoice) volume.CreateRequest {
		r := req(name, 8*mib)
		r.VG, r.VGs = "", &c
		return r
	}
	v, err := b.CreateVolume(ctx, choice("pvc-spread", both))
	if err != nil || v.ID.VG != "vg1" {
		t.Fatalf("spread: %+v, %v; want vg1", v.ID, err)
	}
	pack := both
	pack.Policy = volume.Pack
	if p, err := b.CreateVolume(ctx, choice("pvc-pack", pack)); err != nil || p.ID.VG != "vg0" {
		t.Fatalf("pack: %+v, %v; want vg0", p.ID, err)
	}
	if _, err := f.CreateLV(ctx, lvm.CreateLVOptions{VG: "vg1", Name: "filler", Size: 80 * mib}); err != nil {
		t.Fatal(err)
	}
	report()
	if again, err := b.CreateVolume(ctx, choice("pvc-spread", both)); err != nil || again.ID != v.ID {
		t.Fatalf("retry: %+v, %v; want %+v", again.ID, err, v.ID)
	}
	if tagged, err := b.CreateVolume(ctx, choice("pvc-tag", volume.VGChoice{Tag: "fast"})); err != nil || tagged.ID.VG != "vg1" {
		t.Fatalf("@fast: %+v, %v; want vg1", tagged.ID, err)
	}
	report()
	for _, c := range []volume.VGChoice{both, {Tag: "fast"}} {
		got, err := b.Capacity(ctx, "node-a", c, volume.Type{})
		direct, derr := m.Capacity(ctx, "node-a", c, volume.Type{})
		if err != nil || derr != nil || got != direct || got.AvailableBytes == 0 {
			t.Errorf("capacity of %s: %+v, %v; standalone %+v, %v", c, got, err, direct, derr)
		}
	}
	_, err = b.CreateVolume(ctx, choice("pvc-nowhere", volume.VGChoice{Tag: "slow"}))
	if code := volume.CodeOf(err); code != codes.ResourceExhausted {
		t.Errorf("no VG with the tag: %v (%v), want RESOURCE_EXHAUSTED", code, err)
	}
}

// TestImmediateClaimGoesWhereThereIsRoom: a request that allows several
// nodes (an Immediate-binding claim's allowed topologies) is placed on
// the first, in the CO's order, whose report holds it, not on the first
// alone; a retry keeps the node its resource records though the reports
// changed since; a restore stays on its snapshot's node when that is
// allowed; when none has room the first is asked, and its agent's
// refusal is RESOURCE_EXHAUSTED.
func TestImmediateClaimGoesWhereThereIsRoom(t *testing.T) {
	var a *lvmvol.Manager
	b, f := clusterWith(t, func(cfg *lvmvol.Config, _ *lvmfake.LVM) { a = lvmvol.NewManager(*cfg) })
	ctx := within(t)
	small := lvmfake.New(16*mib, "vg0")
	bm := lvmvol.NewManager(lvmvol.Config{LVM: small, Wiper: small, Node: "node-b", VolumeGroups: []string{"vg0"}})
	report := func() {
		t.Helper()
		for node, m := range map[string]*lvmvol.Manager{"node-a": a, "node-b": bm} {
			if err := (&agent.StorageReporter{Client: b.Client, Node: node, Space: m.Space}).Report(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, snap := thinSnapshot(ctx, t, b, f) // node-a: 40 MiB of its 100 a pool
	report()
	among := func(name string, size int64, nodes ...string) volume.CreateRequest {
		r := req(name, size)
		r.Node, r.OtherNodes = nodes[0], nodes[1:]
		return r
	}
	v, err := b.CreateVolume(ctx, among("pvc-roomy", 40*mib, "node-b", "node-a"))
	if err != nil || v.ID.Node != "node-a" {
		t.Fatalf("40 MiB, node-b (16 MiB) preferred: %+v, %v; want node-a", v.ID, err)
	}
	restore := among("pvc-restore", 8*mib, "node-b", "node-a")
	restore.Type, restore.VG = volume.Type{ThinPool: "pool"}, ""
	restore.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: snap.ID}
	if r, err := b.CreateVolume(ctx, restore); err != nil || r.ID.Node != "node-a" {
		t.Fatalf("a restore of node-a's snapshot, node-b preferred: %+v, %v; want node-a", r.ID, err)
	}
	if w, err := b.CreateVolume(ctx, among("pvc-first", 8*mib, "node-a", "node-b")); err != nil || w.ID.Node != "node-a" {
		t.Fatalf("8 MiB, node-a preferred: %+v, %v; want node-a", w.ID, err)
	}
	if _, err := f.CreateLV(ctx, lvm.CreateLVOptions{VG: "vg0", Name: "filler", Size: 10 * mib}); err != nil {
		t.Fatal(err)
	}
	report()
	if again, err := b.CreateVolume(ctx, among("pvc-roomy", 40*mib, "node-b", "node-a")); err != nil || again.ID != v.ID {
		t.Fatalf("a retry after node-a filled: %+v, %v; want %+v", again.ID, err, v.ID)
	}
	_, err = b.CreateVolume(ctx, among("pvc-nowhere", 60*mib, "node-a", "node-b"))
	wantCode(t, "60 MiB on nodes with under 16 MiB free", err, codes.ResourceExhausted)
}
