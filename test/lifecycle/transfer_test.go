//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

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
			return m.TransferSource(ctx, id)
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
	target, closeTarget, err := m.TransferTarget(ctx, lv)
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
