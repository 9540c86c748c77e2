package transfer

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"

	"carve.dev/carve/driver/volume"
)

const baseID = "node-a/vg/snap0"

// changedImage is thinImage after a few writes, and the ranges a thin
// pool's metadata reports as changed: a rewritten run inside the first
// allocated range, a new run across a segment boundary, and a run
// rewritten with zeroes (the receiver must zero it, whatever the base
// held there).
func changedImage(base image) (image, []volume.Range) {
	im := image{data: bytes.Clone(base.data), allocated: base.allocated}
	changed := []volume.Range{
		{Offset: 128 << 10, Length: 64 << 10},
		{Offset: 3*mib - 64<<10, Length: 128 << 10},
		{Offset: mib + 512<<10, Length: 64 << 10},
	}
	for i, r := range changed {
		for o := r.Offset; o < r.End(); o++ {
			im.data[o] = byte(o*7 + int64(i))
		}
	}
	clear(im.data[changed[2].Offset:changed[2].End()])
	// In offset order, as a pool's metadata reports them.
	changed[1], changed[2] = changed[2], changed[1]
	return im, changed
}

// deltaSource serves an image's changed ranges only.
type deltaSource struct {
	memSource
	changed []volume.Range
}

func (s *deltaSource) Allocated(ctx context.Context, from int64, each func(volume.Range) error) error {
	for _, r := range s.changed {
		if r.End() <= from {
			continue
		}
		if err := each(r); err != nil {
			return err
		}
	}
	return nil
}

// catchUpWorld serves next as a catch-up from baseID to node-b, and the
// whole of next without a base.
func catchUpWorld(t *testing.T, next image, changed []volume.Range) *world {
	t.Helper()
	return newWorld(t, next, func(cfg *ServerConfig) {
		full := cfg.Authorize
		cfg.Authorize = func(ctx context.Context, peer string, req Request) (Source, error) {
			if req.Base == "" {
				return full(ctx, peer, req)
			}
			if req.Base != baseID {
				return nil, ErrRefused
			}
			return &deltaSource{memSource: memSource{im: next}, changed: changed}, nil
		}
	})
}

// baseTarget is a target holding base's bytes, as a move's first copy
// left it.
func baseTarget(t *testing.T, base image) *fileTarget {
	t.Helper()
	target := newTarget(t, len(base.data))
	if _, err := target.f.WriteAt(base.data, 0); err != nil {
		t.Fatal(err)
	}
	return target
}

// TestTransferCatchUp: a request naming a base gets only the ranges that
// changed since it; the target, which held the base, then holds the
// source byte for byte, a range rewritten with zeroes included; checked
// per segment and resumed from its checkpoint as a copy is.
func TestTransferCatchUp(t *testing.T) {
	base := thinImage()
	next, changed := changedImage(base)
	size := len(next.data)
	req := Request{Source: sourceID, Base: baseID, For: "pvc-1"}
	var changedBytes int64
	for _, r := range changed {
		changedBytes += r.Length
	}

	t.Run("whole", func(t *testing.T) {
		w := catchUpWorld(t, next, changed)
		target := baseTarget(t, base)
		var cp checkpoints
		res, err := w.client.Receive(context.Background(), w.addr, "node-a", req, target, int64(size), cp.record)
		if err != nil {
			t.Fatal(err)
		}
		if got := target.content(t, size); !bytes.Equal(got, next.data) {
			t.Fatalf("the target differs from the source at byte %d", firstDiff(got, next.data))
		}
		zeroed := int64(64 << 10)
		if res.DataBytes != changedBytes-zeroed || target.zeroed.Load() != zeroed || res.KeptBytes != int64(size)-changedBytes {
			t.Errorf("result %+v, %d bytes zeroed: want %d data bytes, %d zeroed and %d kept",
				res, target.zeroed.Load(), changedBytes-zeroed, zeroed, int64(size)-changedBytes)
		}
		if len(cp.done) != 6 || cp.last() != int64(size) {
			t.Errorf("checkpoints %v, want one per segment", cp.done)
		}
	})
	t.Run("resumed after a cut", func(t *testing.T) {
		w := catchUpWorld(t, next, changed)
		target := baseTarget(t, base)
		cut := *w.client
		cut.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			// Inside the third segment's data: the first segment sends
			// 64 KiB of data, the second a zero run.
			return &cutConn{Conn: c, left: 64<<10 + 30000}, err
		}
		var cp checkpoints
		if _, err := cut.Receive(context.Background(), w.addr, "node-a", req, target, int64(size), cp.record); err == nil {
			t.Fatal("a catch-up whose connection dropped succeeded")
		}
		from := cp.last()
		if from != 2*mib {
			t.Fatalf("last checkpoint %d before the cut, want %d", from, 2*mib)
		}
		again := req
		again.From = from
		if _, err := w.client.Receive(context.Background(), w.addr, "node-a", again, target, int64(size), cp.record); err != nil {
			t.Fatal(err)
		}
		if got := target.content(t, size); !bytes.Equal(got, next.data) {
			t.Fatalf("the resumed target differs from the source at byte %d", firstDiff(got, next.data))
		}
	})
	t.Run("the base is another node's", func(t *testing.T) {
		w := catchUpWorld(t, next, changed)
		bad := req
		bad.Base = "node-c/vg/snap0"
		_, err := w.client.Receive(context.Background(), w.addr, "node-a", bad, baseTarget(t, base), int64(size), (&checkpoints{}).record)
		if !errors.Is(err, ErrProtocol) || w.asked.Load() != 0 {
			t.Fatalf("got %v (the Authorizer asked %d times), want a protocol error before any request", err, w.asked.Load())
		}
	})
}

// TestTransferRefusesKeepRunsOutsideCatchUps: a keep run in a transfer
// that named no base would leave a new volume's bytes as a former LV left
// them; the receiver stops, and writes nothing for it.
func TestTransferRefusesKeepRunsOutsideCatchUps(t *testing.T) {
	target := newTarget(t, mib)
	rc := &receiver{t: target, checkpoint: (&checkpoints{}).record}
	_, err := rc.apply(frame{kind: kindKeep, off: 0, n: mib}, mib)
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("a keep run outside a catch-up: %v, want a protocol error", err)
	}
	rc.catchUp = true
	if _, err := rc.apply(frame{kind: kindKeep, off: 0, n: mib}, mib); err != nil {
		t.Fatalf("a keep run in a catch-up: %v", err)
	}
	if _, err := rc.apply(frame{kind: kindSegment, off: mib, digest: func() [32]byte {
		var d segmentDigest
		d.add(frame{kind: kindKeep, off: 0, n: mib})
		return d.sum()
	}()}, mib); err != nil {
		t.Fatalf("the keep run's segment: %v", err)
	}
	if got := target.content(t, mib); !bytes.Equal(got, bytes.Repeat([]byte{0xaa}, mib)) {
		t.Error("a keep run wrote the target")
	}
}
