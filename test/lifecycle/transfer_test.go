//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/transfer"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testpki"
)

// serveSnapshots serves m's snapshots to node-b on a loopback port until
// the test ends.
func serveSnapshots(t *testing.T, m *lvmvol.Manager) string {
	t.Helper()
	ca := testpki.New(t, "transfer CA")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := transfer.NewServer(transfer.ServerConfig{Keyring: transfer.NewKeyring(loadCreds(t, ca.Node(t, node))),
		Authorize: func(ctx context.Context, peer string, req transfer.Request) (transfer.Source, error) {
			id, err := volume.ParseID(req.Source)
			if err != nil {
				return nil, err
			}
			var base volume.ID
			if req.Base != "" {
				if base, err = volume.ParseID(req.Base); err != nil {
					return nil, err
				}
			}
			return m.TransferSource(ctx, id, base)
		}})
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		must(t, <-done)
	})
	clientCreds = loadCreds(t, ca.Node(t, "node-b"))
	return l.Addr().String()
}

// clientCreds are node-b's, of serveSnapshots' CA.
var clientCreds transfer.Credentials

func loadCreds(t *testing.T, f testpki.Files) transfer.Credentials {
	t.Helper()
	c, err := transfer.LoadCredentials(f.Cert, f.Key, f.CA)
	must(t, err)
	return c
}

// receive transfers snapshot snap into lv as node-b would.
func receive(t *testing.T, m *lvmvol.Manager, addr, snap string, lv lvm.LV) transfer.Result {
	t.Helper()
	ctx := context.Background()
	target, closeTarget, err := m.TransferTarget(ctx, lv, false)
	must(t, err)
	defer func() { must(t, closeTarget()) }()
	c := &transfer.Client{Keyring: transfer.NewKeyring(clientCreds)}
	res, err := c.Receive(ctx, addr, node, transfer.Request{Source: snap, For: "pvc-tx"}, target, int64(lv.Size),
		func(int64) error { return nil })
	must(t, err)
	return res
}

// readDevice reads the first n bytes of a device.
func readDevice(t *testing.T, dev string, n int) []byte {
	t.Helper()
	f, err := os.Open(filepath.Clean(dev))
	must(t, err)
	defer func() { _ = f.Close() }()
	b := make([]byte, n)
	_, err = f.ReadAt(b, 0)
	must(t, err)
	return b
}

// TestTransferOnRealLVM: lvmvol's side of the node-to-node transfer on
// real LVM, over driver/transfer's TLS on loopback: a thin snapshot
// (activated for the transfer, its mapped chunks read from the pool's
// metadata, with O_DIRECT) sent into a new thin volume, which maps no
// more than the source's data, and into a thick volume holding other
// data, whose unsent runs are zeroed; both read back byte for byte as
// the snapshot's origin.
func TestTransferOnRealLVM(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.addPool(512 * mib)
	const size = 64 * mib
	src := e.thinBlockVolume("pvc-tx-src", size)
	dev := src.PublishContext["devicePath"]
	writeDirect(t, dev, 8192, 0, 5*mib+4096, size-8192)
	writeDirect(t, dev, 3*mib, 20*mib)
	snap := e.snapshot("tx-snap", src.ID).GetSnapshotId()
	want := readDevice(t, dev, size)

	run := runner.New(time.Minute)
	cache := lvm.NewCache(lvm.New(run), 0)
	m := lvmvol.NewManager(lvmvol.Config{LVM: cache, Cache: cache, Wiper: lvmvol.ZeroWiper{Run: run}, Node: node, VolumeGroups: []string{vg}})
	addr := serveSnapshots(t, m)

	thin := e.thinBlockVolume("pvc-tx-thin", size)
	thick, err := e.c.Create(ctx, "pvc-tx-thick", size, nil, csiflow.BlockCap(snw))
	must(t, err)
	must(t, thick.Attach(ctx, node))
	writeDirect(t, thick.PublishContext["devicePath"], size, 0) // a former tenant's data

	for _, v := range []*csiflow.Volume{thin, thick} {
		lv, ok := e.lv(v)
		if !ok {
			t.Fatalf("no LV of %s", v.ID)
		}
		start := time.Now()
		res := receive(t, m, addr, snap, lv)
		d := time.Since(start)
		t.Logf("%s: %d bytes, %d of them as data, in %v (%.1f MiB/s)", v.ID, res.Size, res.DataBytes, d, float64(res.Size)/mib/d.Seconds())
		if got := readDevice(t, v.PublishContext["devicePath"], size); !bytes.Equal(got, want) {
			t.Fatalf("%s differs from the snapshot's origin", v.ID)
		}
		if res.DataBytes > 4*mib {
			t.Errorf("%s: %d bytes sent as data for 3 MiB and 24 KiB written", v.ID, res.DataBytes)
		}
	}
	// The thin target maps what was sent, not its whole size.
	lv, _ := e.lv(thin)
	if lv.DataPercent > 10 {
		t.Errorf("the thin target is %.1f%% mapped after a transfer of 3 MiB of 64 MiB", lv.DataPercent)
	}
	// The snapshot rests inactive again.
	sid, err := volume.ParseID(snap)
	must(t, err)
	if got, err := e.lvm.GetLV(ctx, vg, sid.LV); err != nil || got.Active {
		t.Errorf("the snapshot after its transfers: active %v, %v", got.Active, err)
	}
}

// remoteOf is node-b's lvmvol.Remote in one VM: the transfer client,
// dialling serveSnapshots' address. cut, when set, ends the first
// transfer after its first checked segment, as a dropped connection
// would.
type remoteOf struct {
	addr string
	cut  bool
	asks int
	last transfer.Result // the last transfer's
}

func (r *remoteOf) Receive(ctx context.Context, source, base volume.ID, forLV string, t transfer.Target, size, from int64, checkpoint transfer.Checkpoint) error {
	r.asks++
	cp := checkpoint
	if r.cut && r.asks == 1 {
		cp = func(done int64) error {
			if err := checkpoint(done); err != nil {
				return err
			}
			return errors.New("connection cut (test)")
		}
	}
	c := &transfer.Client{Keyring: transfer.NewKeyring(clientCreds)}
	req := transfer.Request{Source: source.String(), For: forLV, From: from}
	if base != (volume.ID{}) {
		req.Base = base.String()
	}
	var err error
	r.last, err = c.Receive(ctx, r.addr, source.Node, req, t, size, cp)
	return err
}

// TestRestoreFromAnotherNodeOnRealLVM: a volume of "node-b" restored from
// a snapshot of the test's node, its bytes received over the transfer
// (both nodes' Managers share the VM's VG, as two nodes' would their
// own): into a thin and a thick volume, byte for byte as the snapshot's
// origin, settled (no copying or progress tags), reporting the snapshot
// as its source, and found again by a retry; a transfer cut after its
// first segment leaves the volume copying, not handed out, and the retry
// finishes it. A clone of another node's volume, and a restore on a node
// that receives nothing, are NOT_FOUND and leave no LV.
func TestRestoreFromAnotherNodeOnRealLVM(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.addPool(512 * mib)
	const size = 80 * mib // two segments of 64 MiB
	src := e.thinBlockVolume("pvc-rr-src", size)
	dev := src.PublishContext["devicePath"]
	writeDirect(t, dev, 8192, 0, 70*mib)
	writeDirect(t, dev, 2*mib, 30*mib)
	snap := e.snapshot("rr-snap", src.ID).GetSnapshotId()
	want := readDevice(t, dev, size)
	sid, err := volume.ParseID(snap)
	must(t, err)

	run := runner.New(time.Minute)
	cache := lvm.NewCache(lvm.New(run), 0)
	cfg := lvmvol.Config{LVM: cache, Cache: cache, Wiper: lvmvol.ZeroWiper{Run: run}, Node: node, VolumeGroups: []string{vg}}
	addr := serveSnapshots(t, lvmvol.NewManager(cfg))
	remote := &remoteOf{addr: addr, cut: true}
	cfg.Node, cfg.Remote = "node-b", remote
	b := lvmvol.NewManager(cfg)

	from := &volume.ContentSource{Kind: volume.SourceSnapshot, ID: sid}
	for _, typ := range []volume.Type{{ThinPool: pool}, {}} {
		req := volume.CreateRequest{Name: "pvc-rr-" + map[bool]string{true: "thin", false: "thick"}[typ.IsThin()],
			Node: "node-b", VG: vg, RequiredBytes: size, Type: typ, Source: from, ParamsDigest: "00"}
		vol, err := b.CreateVolume(ctx, req)
		if remote.cut {
			// The first try is cut after its first segment.
			if err == nil {
				t.Fatal("a transfer cut after its first segment made a volume")
			}
			lv, gerr := e.lvm.GetLV(ctx, vg, volume.LVName(req.Name))
			must(t, gerr)
			if !lv.HasTag("carve.dev/copying") {
				t.Fatalf("a cut transfer left %s with tags %v, want copying", lv.Name, lv.Tags)
			}
			remote.cut = false
			vol, err = b.CreateVolume(ctx, req)
		}
		must(t, err)
		if vol.Source == nil || *vol.Source != *from {
			t.Fatalf("%s: source %+v, want %+v", req.Name, vol.Source, from)
		}
		lv, err := e.lvm.GetLV(ctx, vg, vol.ID.LV)
		must(t, err)
		for _, tag := range lv.Tags {
			if strings.HasPrefix(tag, "carve.dev/copying") || strings.HasPrefix(tag, "carve.dev/copied=") || tag == "carve.dev/pending" {
				t.Errorf("%s settled with tag %s", lv.Name, tag)
			}
		}
		if lv.Active {
			t.Errorf("%s is active after its creation", lv.Name)
		}
		must(t, e.lvm.Activate(ctx, vg, lv.Name))
		got := readDevice(t, "/dev/"+vg+"/"+lv.Name, size)
		must(t, e.lvm.Deactivate(ctx, vg, lv.Name))
		if !bytes.Equal(got, want) {
			t.Fatalf("%s differs from the snapshot's origin", lv.Name)
		}
		again, err := b.CreateVolume(ctx, req)
		if err != nil || again.ID != vol.ID {
			t.Fatalf("%s: a retry got %+v, %v", req.Name, again.ID, err)
		}
	}

	refused := map[string]func() error{
		"a clone of another node's volume": func() error {
			srcVol, err := volume.ParseID(src.ID)
			must(t, err)
			_, err = b.CreateVolume(ctx, volume.CreateRequest{Name: "pvc-rr-clone", Node: "node-b", VG: vg, RequiredBytes: size,
				Source: &volume.ContentSource{Kind: volume.SourceVolume, ID: srcVol}, ParamsDigest: "00"})
			return err
		},
		"a node that receives nothing": func() error {
			c := cfg
			c.Remote = nil
			_, err := lvmvol.NewManager(c).CreateVolume(ctx, volume.CreateRequest{Name: "pvc-rr-none", Node: "node-b", VG: vg,
				RequiredBytes: size, Source: from, ParamsDigest: "00"})
			return err
		},
	}
	for name, try := range refused {
		err := try()
		if !errors.Is(err, volume.ErrVolumeNotFound) && !errors.Is(err, volume.ErrSnapshotNotFound) {
			t.Errorf("%s: %v, want not found", name, err)
		}
	}
	for _, name := range []string{"pvc-rr-clone", "pvc-rr-none"} {
		if _, err := e.lvm.GetLV(ctx, vg, volume.LVName(name)); err == nil {
			t.Errorf("a refused restore left LV %s", name)
		}
	}
}

// publishedAt is an API server's read of every node's NodeStorage that
// publishes addr as the node's transfer address.
type publishedAt struct {
	client.Reader
	addr string
}

func (p publishedAt) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	obj.(*v1alpha1.NodeStorage).Status.TransferAddress = p.addr
	obj.SetName(key.Name)
	return nil
}

// TestRestoreGivesUpOnUnreachableNodeOnRealLVM: a restore on "node-b"
// whose snapshot's node refuses every connection fails, leaving its new
// LV copying for the retry, until the node agent's receiver has tried for
// its give-up time; then the retry answers RESOURCE_EXHAUSTED (the CO
// places the claim again) and the new LV is gone, active as the receive
// left it or not.
func TestRestoreGivesUpOnUnreachableNodeOnRealLVM(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.addPool(256 * mib)
	src := e.thinBlockVolume("pvc-gu-src", 16*mib)
	sid, err := volume.ParseID(e.snapshot("gu-snap", src.ID).GetSnapshotId())
	must(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	closed := l.Addr().String()
	must(t, l.Close())

	run := runner.New(time.Minute)
	cache := lvm.NewCache(lvm.New(run), 0)
	const giveUp = 200 * time.Millisecond
	b := lvmvol.NewManager(lvmvol.Config{LVM: cache, Cache: cache, Wiper: lvmvol.ZeroWiper{Run: run}, Node: "node-b", VolumeGroups: []string{vg},
		Remote: &agent.TransferReceiver{Client: &transfer.Client{Keyring: transfer.NewKeyring(loadCreds(t, testpki.New(t, "transfer CA").Node(t, "node-b")))}, Reader: publishedAt{addr: closed}, GiveUp: giveUp}})
	for _, typ := range []volume.Type{{ThinPool: pool}, {}} {
		req := volume.CreateRequest{Name: "pvc-gu-" + map[bool]string{true: "thin", false: "thick"}[typ.IsThin()],
			Node: "node-b", VG: vg, RequiredBytes: 16 * mib, Type: typ, ParamsDigest: "00",
			Source: &volume.ContentSource{Kind: volume.SourceSnapshot, ID: sid}}
		lvName := volume.LVName(req.Name)
		_, err := b.CreateVolume(ctx, req)
		if !errors.Is(err, transfer.ErrUnreachable) || errors.Is(err, transfer.ErrGaveUp) {
			t.Fatalf("%s, first try: %v, want unreachable, not given up", req.Name, err)
		}
		lv, err := e.lvm.GetLV(ctx, vg, lvName)
		must(t, err)
		if !lv.HasTag("carve.dev/copying") {
			t.Fatalf("the first try left %s with tags %v, want copying", lvName, lv.Tags)
		}
		time.Sleep(giveUp)
		_, err = b.CreateVolume(ctx, req)
		if !errors.Is(err, transfer.ErrGaveUp) || volume.CodeOf(err) != codes.ResourceExhausted {
			t.Fatalf("%s after %s: %v (%s), want given up, RESOURCE_EXHAUSTED", req.Name, giveUp, err, volume.CodeOf(err))
		}
		if _, err := e.lvm.GetLV(ctx, vg, lvName); !errors.Is(err, lvm.ErrNotFound) {
			t.Fatalf("%s after giving up: %v, want no LV", lvName, err)
		}
	}
}

// zeroBuffered writes n zero bytes at off through the page cache, then
// flushes: blocks written before, rewritten as zeroes.
func zeroBuffered(t *testing.T, dev string, n int, off int64) {
	t.Helper()
	f, err := os.OpenFile(filepath.Clean(dev), os.O_WRONLY, 0)
	must(t, err)
	defer func() { _ = f.Close() }()
	_, err = f.WriteAt(make([]byte, n), off)
	must(t, err)
	must(t, f.Sync())
}

// TestCatchUpFromAnotherNodeOnRealLVM: a move's catch-up on real LVM. A
// volume of "node-b" is restored from snapshot S1 of the test's node;
// known blocks of the source are then written (4 KiB, 1 MiB across the
// first segment's end) and rewritten as zeroes (2 MiB), and S2 taken.
// lvmvol.CatchUp of the node-b volume from S1 to S2 sends only the
// chunks the pool's metadata says changed (thin: at most a chunk on
// either side of each run), zeroes the rewritten run, keeps the rest,
// and leaves it byte for byte as S2: into a thin and a thick target. A
// thick source, whose snapshots record no delta, sends all of S2 and
// keeps nothing. The targets end settled, with no progress record, and
// inactive.
func TestCatchUpFromAnotherNodeOnRealLVM(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.addPool(512 * mib)
	const size = 80 * mib // two segments of 64 MiB

	run := runner.New(time.Minute)
	cache := lvm.NewCache(lvm.New(run), 0)
	cfg := lvmvol.Config{LVM: cache, Cache: cache, Wiper: lvmvol.ZeroWiper{Run: run}, Node: node, VolumeGroups: []string{vg}}
	addr := serveSnapshots(t, lvmvol.NewManager(cfg))
	remote := &remoteOf{addr: addr}
	cfg.Node, cfg.Remote = "node-b", remote
	b := lvmvol.NewManager(cfg)
	// The node agent's Manager: the catch-up in the background.
	cfg.BackgroundDataWork, cfg.DataGrace = true, 10*time.Millisecond
	agentSide := lvmvol.NewManager(cfg)
	pendings := 0

	thinSrc := e.thinBlockVolume("pvc-cu-src", size)
	thickSrc, err := e.c.Create(ctx, "pvc-cu-thick-src", size, nil, csiflow.BlockCap(snw))
	must(t, err)
	must(t, thickSrc.Attach(ctx, node))
	for _, c := range []struct {
		name    string
		src     *csiflow.Volume
		targets []volume.Type
	}{
		{"thin", thinSrc, []volume.Type{{ThinPool: pool}, {}}},
		{"thick", thickSrc, []volume.Type{{}}},
	} {
		dev := c.src.PublishContext["devicePath"]
		writeDirect(t, dev, 8192, 0, 70*mib)
		writeDirect(t, dev, 2*mib, 30*mib)
		s1, err := volume.ParseID(e.snapshot("cu-s1-"+c.name, c.src.ID).GetSnapshotId())
		must(t, err)
		var vols []volume.Volume
		for _, typ := range c.targets {
			req := volume.CreateRequest{Name: "pvc-cu-" + c.name + "-to-" + map[bool]string{true: "thin", false: "thick"}[typ.IsThin()],
				Node: "node-b", VG: vg, RequiredBytes: size, Type: typ, ParamsDigest: "00",
				Source: &volume.ContentSource{Kind: volume.SourceSnapshot, ID: s1}}
			vol, err := b.CreateVolume(ctx, req)
			must(t, err)
			vols = append(vols, vol)
		}
		// Between S1 and S2: new blocks, and old ones zeroed.
		writeDirect(t, dev, 4096, 10*mib)
		writeDirect(t, dev, mib, 64*mib-mib/2)
		zeroBuffered(t, dev, 2*mib, 30*mib)
		s2, err := volume.ParseID(e.snapshot("cu-s2-"+c.name, c.src.ID).GetSnapshotId())
		must(t, err)
		want := readDevice(t, dev, size)

		for _, vol := range vols {
			start := time.Now()
			pendings += catchUpInBackground(t, agentSide, remote, vol.ID, s1, s2)
			res := remote.last
			t.Logf("%s source into %s: %d bytes sent as data, %d kept, in %v", c.name, vol.ID, res.DataBytes, res.KeptBytes, time.Since(start))
			lv, err := e.lvm.GetLV(ctx, vg, vol.ID.LV)
			must(t, err)
			if lv.Active {
				t.Errorf("%s is active after its catch-up", lv.Name)
			}
			for _, tag := range lv.Tags {
				if strings.HasPrefix(tag, "carve.dev/copied=") || tag == "carve.dev/copying" || tag == "carve.dev/held" {
					t.Errorf("%s caught up with tag %s", lv.Name, tag)
				}
			}
			must(t, e.lvm.Activate(ctx, vg, lv.Name))
			got := readDevice(t, "/dev/"+vg+"/"+lv.Name, size)
			must(t, e.lvm.Deactivate(ctx, vg, lv.Name))
			if !bytes.Equal(got, want) {
				t.Fatalf("%s differs from S2 after its catch-up, at byte %d", lv.Name, firstDiffAt(got, want))
			}
			if c.name == "thick" {
				if res.KeptBytes != 0 {
					t.Errorf("a thick source kept %d bytes: its snapshots have no delta", res.KeptBytes)
				}
				continue
			}
			// 4 KiB and 1 MiB written: whole chunks, at most one more on
			// either side of each run; the zeroed run is not data.
			if res.DataBytes < mib+4096 || res.DataBytes > mib+512<<10 {
				t.Errorf("%d bytes sent as data for 1 MiB and 4 KiB written", res.DataBytes)
			}
			if res.KeptBytes < size-4*mib {
				t.Errorf("%d bytes kept of %d: the catch-up sent more than the changed chunks", res.KeptBytes, size)
			}
		}
	}
	if pendings == 0 {
		t.Error("no catch-up outlasted its call's grace: the background path went untested")
	}
}

func firstDiffAt(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// catchUpInBackground runs m's CatchUp as the node agent does, again
// while it answers that the work runs, and says how many times it did.
// Meanwhile the volume must not look published: the agent refuses to
// catch up a published volume, and a catch-up that showed its own
// activation as a publish was refused at the next call and never ended.
// Nor may a call after the job's end start it again: one did, each call
// answering that the work runs (remote.asks counts the transfers).
func catchUpInBackground(t *testing.T, m *lvmvol.Manager, r *remoteOf, id, base, snap volume.ID) int {
	t.Helper()
	ctx := context.Background()
	asks := r.asks
	for n := 0; ; n++ {
		err := m.CatchUp(ctx, id, base, snap)
		if r.asks > asks+1 {
			t.Fatalf("%s: %d transfers for one catch-up", id, r.asks-asks)
		}
		if !errors.Is(err, volume.ErrDataPending) {
			must(t, err)
			return n
		}
		vol, err := m.GetVolume(ctx, lvm.Fresh, id)
		must(t, err)
		if vol.Published {
			t.Fatalf("%s reads as published while it catches up", id)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
