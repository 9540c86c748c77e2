package transfer

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/test/testpki"
)

const (
	sourceID = "node-a/vg/snap1"
	mib      = 1 << 20
	// testSegment is small, so that a few MiB make several segments.
	testSegment = mib
)

// image is a source's content: the bytes, and the ranges a thin pool
// would report as allocated (nil: a thick source, all of it).
type image struct {
	data      []byte
	allocated []volume.Range
}

// thinImage is 5 MiB and 12 KiB (the last segment is short) with data in
// three allocated ranges, one of which holds only zeroes (written zeroes
// stay allocated in a thin pool) and one that crosses a segment boundary.
func thinImage() image {
	size := 5*mib + 12<<10
	im := image{data: make([]byte, size), allocated: []volume.Range{
		{Offset: 64 << 10, Length: 192 << 10},
		{Offset: mib + 512<<10, Length: 2 * mib},       // crosses two boundaries
		{Offset: 4 * mib, Length: 256 << 10},           // written zeroes
		{Offset: 5 * mib, Length: int64(size) - 5*mib}, // the short tail
	}}
	rng := rand.New(rand.NewPCG(1, 2))
	for i, r := range im.allocated {
		if i == 2 {
			continue
		}
		for o := r.Offset; o < r.End(); o++ {
			im.data[o] = byte(rng.Uint32())
		}
	}
	return im
}

// dataBytes is how many bytes the image holds that are not zero chunks:
// what a transfer sends as data.
func (im image) dataBytes() int64 {
	var n int64
	for _, r := range im.ranges() {
		for o := r.Offset; o < r.End(); {
			end := min(r.End(), (o/testSegment+1)*testSegment, o+MaxData)
			if !allZero(im.data[o:end]) {
				n += end - o
			}
			o = end
		}
	}
	return n
}

func (im image) ranges() []volume.Range {
	if im.allocated == nil {
		return []volume.Range{{Offset: 0, Length: int64(len(im.data))}}
	}
	return im.allocated
}

// memSource serves an image.
type memSource struct {
	im     image
	closed atomic.Bool
	// block, if set, is waited for before each read.
	block chan struct{}
}

func (s *memSource) ReadAt(b []byte, off int64) (int, error) {
	if s.block != nil {
		<-s.block
	}
	return copy(b, s.im.data[off:]), nil
}
func (s *memSource) Size() int64 { return int64(len(s.im.data)) }
func (s *memSource) Close() error {
	s.closed.Store(true)
	return nil
}
func (s *memSource) Allocated(ctx context.Context, from int64, each func(volume.Range) error) error {
	for _, r := range s.im.ranges() {
		if r.End() <= from {
			continue
		}
		if err := each(r); err != nil {
			return err
		}
	}
	return nil
}

// fileTarget is a file standing for the new volume's device. corrupt, if
// set, flips a byte of what one WriteAt at that offset writes, as a
// failing disk might.
type fileTarget struct {
	f       *os.File
	corrupt int64
	zeroed  atomic.Int64
}

func newTarget(t testing.TB, size int) *fileTarget {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "target"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	// What a former LV left on the extents: every byte must be written
	// or zeroed.
	if _, err := f.Write(bytes.Repeat([]byte{0xaa}, size)); err != nil {
		t.Fatal(err)
	}
	return &fileTarget{f: f, corrupt: -1}
}

func (ft *fileTarget) WriteAt(b []byte, off int64) (int, error) {
	if off == ft.corrupt {
		b = bytes.Clone(b)
		b[len(b)/2] ^= 0x10
	}
	return ft.f.WriteAt(b, off)
}
func (ft *fileTarget) ReadAt(b []byte, off int64) (int, error) { return ft.f.ReadAt(b, off) }
func (ft *fileTarget) Sync() error                             { return ft.f.Sync() }
func (ft *fileTarget) Zero(off, n int64) error {
	ft.zeroed.Add(n)
	_, err := ft.f.WriteAt(make([]byte, n), off)
	return err
}

func (ft *fileTarget) content(t *testing.T, size int) []byte {
	t.Helper()
	b := make([]byte, size)
	if _, err := ft.f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// world is a server on node-a serving sourceID to node-b, and node-b's
// client.
type world struct {
	addr   string
	client *Client
	source *memSource
	// asked counts the Authorizer's calls.
	asked atomic.Int32
	// serverKeys are the server's credentials.
	serverKeys *Keyring
}

// newWorld starts node-a's server with its credentials from ca; the
// client gets node-b's. The server stops at the test's end.
func newWorld(t testing.TB, im image, opts ...func(*ServerConfig)) *world {
	t.Helper()
	ca := testpki.New(t, "carve transfer CA")
	w := &world{source: &memSource{im: im}, client: &Client{Keyring: NewKeyring(credentials(t, ca, "node-b")), Idle: 10 * time.Second}}
	cfg := ServerConfig{
		Keyring:     NewKeyring(credentials(t, ca, "node-a")),
		SegmentSize: testSegment,
		Idle:        10 * time.Second,
		Authorize: func(ctx context.Context, peer string, req Request) (Source, error) {
			w.asked.Add(1)
			if req.Source != sourceID {
				return nil, fmt.Errorf("snapshot %s: %w", req.Source, volume.ErrSnapshotNotFound)
			}
			if peer != "node-b" {
				return nil, fmt.Errorf("%w: no volume of node %s is restored from %s", ErrRefused, peer, req.Source)
			}
			return w.source, nil
		},
	}
	for _, o := range opts {
		o(&cfg)
	}
	w.serverKeys = cfg.Keyring
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.addr = l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- NewServer(cfg).Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return w
}

// checkpoints records a transfer's checkpoints.
type checkpoints struct {
	mu   sync.Mutex
	done []int64
}

func (c *checkpoints) record(done int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = append(c.done, done)
	return nil
}

func (c *checkpoints) last() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.done) == 0 {
		return 0
	}
	return c.done[len(c.done)-1]
}

func TestTransferCopiesTheSource(t *testing.T) {
	for name, im := range map[string]image{"thin": thinImage(), "thick": {data: thinImage().data}} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, im)
			size := len(im.data)
			target := newTarget(t, size+mib) // a target larger than the source
			var cp checkpoints
			res, err := w.client.Receive(context.Background(), w.addr, "node-a", Request{Source: sourceID, For: "pvc-1"}, target, int64(size+mib), cp.record)
			if err != nil {
				t.Fatal(err)
			}
			if got := target.content(t, size); !bytes.Equal(got, im.data) {
				t.Fatalf("the target differs from the source at byte %d", firstDiff(got, im.data))
			}
			want := []int64{mib, 2 * mib, 3 * mib, 4 * mib, 5 * mib, int64(size)}
			if fmt.Sprint(cp.done) != fmt.Sprint(want) {
				t.Errorf("checkpoints %v, want one per segment %v", cp.done, want)
			}
			if res.Size != int64(size) || res.DataBytes != im.dataBytes() {
				t.Errorf("result %+v, want size %d and %d data bytes (the rest sent as zero runs)", res, size, im.dataBytes())
			}
			if zeroed := target.zeroed.Load(); zeroed != int64(size)-res.DataBytes {
				t.Errorf("%d bytes zeroed, want the %d not sent as data", zeroed, int64(size)-res.DataBytes)
			}
			if !w.source.closed.Load() {
				t.Error("the server did not close the source")
			}
		})
	}
}

// cutConn closes itself once it has read limit bytes: a connection that
// drops mid-transfer.
type cutConn struct {
	net.Conn
	left int64
}

func (c *cutConn) Read(b []byte) (int, error) {
	if c.left <= 0 {
		_ = c.Close()
		return 0, net.ErrClosed
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.Conn.Read(b)
	c.left -= int64(n)
	return n, err
}

func TestTransferResumesFromItsCheckpoint(t *testing.T) {
	im := image{data: thinImage().data}
	w := newWorld(t, im)
	size := len(im.data)
	target := newTarget(t, size)
	cut := *w.client
	cut.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return &cutConn{Conn: c, left: 2*mib + 300<<10}, err // inside the third segment
	}
	var cp checkpoints
	_, err := cut.Receive(context.Background(), w.addr, "node-a", Request{Source: sourceID, For: "pvc-1"}, target, int64(size), cp.record)
	if err == nil {
		t.Fatal("a transfer whose connection dropped succeeded")
	}
	t.Logf("cut: %v", err)
	from := cp.last()
	if from != 2*mib {
		t.Fatalf("last checkpoint %d before the cut, want %d (the segments before it)", from, 2*mib)
	}
	res, err := w.client.Receive(context.Background(), w.addr, "node-a", Request{Source: sourceID, For: "pvc-1", From: from}, target, int64(size), cp.record)
	if err != nil {
		t.Fatal(err)
	}
	if got := target.content(t, size); !bytes.Equal(got, im.data) {
		t.Fatalf("the resumed target differs from the source at byte %d", firstDiff(got, im.data))
	}
	if res.From != from || res.DataBytes > int64(size)-from {
		t.Errorf("the resumed transfer %+v sent more than the %d bytes from %d", res, int64(size)-from, from)
	}
}

func TestTransferChecksWhatWasWritten(t *testing.T) {
	im := image{data: thinImage().data}
	w := newWorld(t, im)
	size := len(im.data)
	target := newTarget(t, size)
	target.corrupt = 3 * mib // the fourth segment's first write
	var cp checkpoints
	_, err := w.client.Receive(context.Background(), w.addr, "node-a", Request{Source: sourceID, For: "pvc-1"}, target, int64(size), cp.record)
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("a target that corrupts a write: %v, want ErrMismatch", err)
	}
	if got := cp.last(); got != 3*mib {
		t.Errorf("last checkpoint %d, want %d: the corrupted segment must not count", got, 3*mib)
	}
}

func TestTransferRefusals(t *testing.T) {
	im := image{data: make([]byte, mib)}
	ctx := context.Background()
	receive := func(w *world, c *Client, node string, req Request) error {
		_, err := c.Receive(ctx, w.addr, node, req, newTarget(t, mib), mib, (&checkpoints{}).record)
		return err
	}
	t.Run("a peer the source's node does not allow", func(t *testing.T) {
		w := newWorld(t, im, func(cfg *ServerConfig) {
			a := cfg.Authorize
			cfg.Authorize = func(ctx context.Context, _ string, req Request) (Source, error) { return a(ctx, "node-c", req) }
		})
		err := receive(w, w.client, "node-a", Request{Source: sourceID, For: "pvc-1"})
		if !errors.Is(err, ErrRefused) || !errors.Is(err, volume.ErrFailedPrecondition) || !strings.Contains(err.Error(), "node-c") {
			t.Fatalf("got %v, want ErrRefused (a failed precondition) saying which node", err)
		}
	})
	t.Run("no such source", func(t *testing.T) {
		w := newWorld(t, im)
		err := receive(w, w.client, "node-a", Request{Source: "node-a/vg/other", For: "pvc-1"})
		if !errors.Is(err, volume.ErrNotFound) {
			t.Fatalf("got %v, want not found", err)
		}
	})
	unauthenticated := map[string]func(w *world) *Client{
		"a client certificate of another CA": func(w *world) *Client {
			c := credentials(t, testpki.New(t, "another CA"), "node-b")
			c.CA = w.client.Keyring.Get().CA // it trusts the server
			return &Client{Keyring: NewKeyring(c)}
		},
	}
	for name, client := range unauthenticated {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, im)
			if err := receive(w, client(w), "node-a", Request{Source: sourceID, For: "pvc-1"}); err == nil {
				t.Fatal("an unauthenticated client was served")
			}
			if n := w.asked.Load(); n != 0 {
				t.Fatalf("the Authorizer was asked %d times for an unauthenticated peer", n)
			}
		})
	}
	t.Run("no client certificate", func(t *testing.T) {
		w := newWorld(t, im)
		// The Client refuses to dial without credentials, so a bare TLS
		// client stands for a peer that has none.
		conn, err := tls.Dial("tcp", w.addr, &tls.Config{RootCAs: w.client.Keyring.Get().CA, ServerName: "node-a",
			MinVersion: tls.VersionTLS13, NextProtos: []string{alpn}})
		if err == nil {
			// TLS 1.3 reports the server's refusal of the client at the
			// first read.
			_, err = conn.Read(make([]byte, 1))
			_ = conn.Close()
		}
		if err == nil {
			t.Fatal("a client without a certificate was served")
		}
		if n := w.asked.Load(); n != 0 {
			t.Fatalf("the Authorizer was asked %d times for an unauthenticated peer", n)
		}
	})
	t.Run("a receiver with no credentials yet", func(t *testing.T) {
		w := newWorld(t, im)
		err := receive(w, &Client{Keyring: &Keyring{}}, "node-a", Request{Source: sourceID, For: "pvc-1"})
		if !errors.Is(err, volume.ErrOperationPending) {
			t.Fatalf("got %v, want a pending operation (no credentials yet)", err)
		}
	})
	t.Run("a server with no credentials yet", func(t *testing.T) {
		w := newWorld(t, im, func(cfg *ServerConfig) { cfg.Keyring = &Keyring{} })
		err := receive(w, w.client, "node-a", Request{Source: sourceID, For: "pvc-1"})
		if err == nil || !strings.Contains(err.Error(), "handshake") {
			t.Fatalf("a server without credentials: %v, want a failed handshake", err)
		}
	})
	t.Run("a server that is not the source's node", func(t *testing.T) {
		w := newWorld(t, im)
		err := receive(w, w.client, "node-z", Request{Source: sourceID, For: "pvc-1"})
		if err == nil || !strings.Contains(err.Error(), "handshake") {
			t.Fatalf("a server whose certificate names node-a was taken for node-z: %v", err)
		}
	})
	t.Run("a certificate naming two nodes", func(t *testing.T) {
		ca := testpki.New(t, "ca")
		w := newWorld(t, im, func(cfg *ServerConfig) { cfg.Keyring = NewKeyring(credentials(t, ca, "node-a")) })
		both := &Client{Keyring: NewKeyring(credentials(t, ca, "node-b", "node-c"))}
		if err := receive(w, both, "node-a", Request{Source: sourceID, For: "pvc-1"}); err == nil {
			t.Fatal("a client whose certificate names two nodes was served")
		}
		if n := w.asked.Load(); n != 0 {
			t.Fatalf("the Authorizer was asked %d times for an ambiguous peer", n)
		}
	})
	t.Run("busy", func(t *testing.T) {
		w := newWorld(t, image{data: make([]byte, 4*mib), allocated: nil}, func(cfg *ServerConfig) { cfg.MaxTransfers = 1 })
		w.source.im.data[0] = 1
		w.source.block = make(chan struct{})
		first := make(chan error, 1)
		go func() {
			_, err := w.client.Receive(ctx, w.addr, "node-a", Request{Source: sourceID, For: "pvc-1"}, newTarget(t, 4*mib), 4*mib, (&checkpoints{}).record)
			first <- err
		}()
		// The first transfer holds the only slot while its read blocks.
		deadline := time.Now().Add(10 * time.Second)
		for w.asked.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		err := receive(w, w.client, "node-a", Request{Source: sourceID, For: "pvc-1"})
		close(w.source.block)
		if !errors.Is(err, ErrBusy) || !errors.Is(err, volume.ErrOperationPending) {
			t.Fatalf("a second transfer beside the only one allowed: %v, want ErrBusy", err)
		}
		if err := <-first; err != nil {
			t.Fatalf("the first transfer: %v", err)
		}
	})
	t.Run("a request naming no volume to fill", func(t *testing.T) {
		w := newWorld(t, im)
		err := receive(w, w.client, "node-a", Request{Source: sourceID})
		if !errors.Is(err, ErrProtocol) || w.asked.Load() != 0 {
			t.Fatalf("got %v (the Authorizer asked %d times), want a protocol error before any request", err, w.asked.Load())
		}
	})
	t.Run("a request past the source's end", func(t *testing.T) {
		w := newWorld(t, im)
		err := receive(w, w.client, "node-a", Request{Source: sourceID, For: "pvc-1", From: 2 * mib})
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("got %v, want a protocol error", err)
		}
	})
	t.Run("a target smaller than the source", func(t *testing.T) {
		w := newWorld(t, im)
		_, err := w.client.Receive(ctx, w.addr, "node-a", Request{Source: sourceID, For: "pvc-1"}, newTarget(t, mib/2), mib/2, (&checkpoints{}).record)
		if err == nil {
			t.Fatal("a source was written into a smaller target")
		}
	})
}

// TestTransferTakesRenewedCredentials: credentials set in a keyring (a
// renewal, a new CA) are those of the next connection, on both sides.
func TestTransferTakesRenewedCredentials(t *testing.T) {
	im := image{data: thinImage().data}
	w := newWorld(t, im)
	size := len(im.data)
	receive := func() error {
		_, err := w.client.Receive(context.Background(), w.addr, "node-a", Request{Source: sourceID, For: "pvc-1"},
			newTarget(t, size), int64(size), (&checkpoints{}).record)
		return err
	}
	renewed := testpki.New(t, "renewed CA")
	w.client.Keyring.Set(credentials(t, renewed, "node-b"))
	if err := receive(); err == nil {
		t.Fatal("a receiver that trusts only the renewed CA took the server's certificate of the old one")
	}
	w.serverKeys.Set(credentials(t, renewed, "node-a"))
	if err := receive(); err != nil {
		t.Fatalf("both sides renewed: %v", err)
	}
}

func TestTransferStopsWhenCancelled(t *testing.T) {
	w := newWorld(t, image{data: bytes.Repeat([]byte{1}, 4*mib)})
	w.source.block = make(chan struct{})
	defer close(w.source.block)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := w.client.Receive(ctx, w.addr, "node-a", Request{Source: sourceID, For: "pvc-1"}, newTarget(t, 4*mib), 4*mib, (&checkpoints{}).record)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a cancelled transfer returned after %v", d)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
