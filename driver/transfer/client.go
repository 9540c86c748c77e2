package transfer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"k8s.io/klog/v2"
)

// Target is where a receiver writes: the new volume's device.
type Target interface {
	io.WriterAt
	io.ReaderAt
	// Zero makes n bytes at off read as zeroes (on a thin LV a discard,
	// which provisions nothing; on a thick one a write of zeroes). In a
	// catch-up the bytes held before may be anything: they must be zeroed.
	Zero(off, n int64) error
	// Sync makes what was written durable.
	Sync() error
}

// Checkpoint is told that the bytes before done are written, flushed and
// checked; it records done where a retry will find it (the LV's tags).
// Its error stops the transfer.
type Checkpoint func(done int64) error

// Client receives sources from other nodes' servers.
type Client struct {
	// Keyring holds the node's credentials.
	Keyring *Keyring
	// Idle is how long a read may wait for the server (default 2
	// minutes): a server gone without a word does not hold a transfer
	// forever.
	Idle time.Duration
	// Dial opens the connection (default: a net.Dialer's DialContext).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Result says what a transfer did.
type Result struct {
	Size      int64 // the source's size
	From      int64 // where it started
	DataBytes int64 // bytes received in data frames (not zero runs)
	KeptBytes int64 // bytes of a catch-up left as the base had them (keep runs)
}

// maxRuns bounds the frames of one segment that the receiver remembers
// for its check: a thin pool's smallest chunk (64 KiB) alternating with
// holes gives 2048 in a 64 MiB segment.
const maxRuns = 1 << 16

// Receive asks node's server at addr for req's source and writes it into
// t from req.From on, telling checkpoint each segment that is written,
// flushed and checked. The target must hold at least the source's size
// (checked against the header). A cut transfer can be asked again from
// its last checkpoint.
func (c *Client) Receive(ctx context.Context, addr, node string, req Request, t Target, targetSize int64, checkpoint Checkpoint) (Result, error) {
	req.Version = protocolVersion
	if err := req.check(); err != nil {
		return Result{}, err
	}
	conn, err := c.dial(ctx, addr, node)
	if err != nil {
		return Result{}, err
	}
	defer func() { _ = conn.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	rc := &receiver{conn: conn, r: bufio.NewReaderSize(conn, MaxData+64), idle: c.idle(), t: t,
		buf: make([]byte, MaxData), check: make([]byte, MaxData), checkpoint: checkpoint}
	res, err := rc.run(ctx, req, targetSize)
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	if err != nil {
		return res, fmt.Errorf("transfer of %s from %s (%s) at byte %d: %w", req.Source, node, addr, rc.cursor, err)
	}
	return res, nil
}

func (c *Client) idle() time.Duration {
	if c.Idle > 0 {
		return c.Idle
	}
	return defaultIdle
}

// dial connects and completes the handshake, which checks that the server
// is node.
func (c *Client) dial(ctx context.Context, addr, node string) (*tls.Conn, error) {
	dial := c.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	creds := c.Keyring.Get()
	if err := creds.ready(); err != nil {
		return nil, fmt.Errorf("transfer from %s: %w", node, err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.idle())
	defer cancel()
	raw, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("transfer from %s (%s): %w: %w", node, addr, ErrUnreachable, err)
	}
	conn := tls.Client(raw, creds.clientConfig(node))
	if err := conn.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("transfer from %s (%s): TLS handshake: %w", node, addr, err)
	}
	return conn, nil
}

// receiver is one transfer's receiving side.
type receiver struct {
	conn       net.Conn
	r          *bufio.Reader
	idle       time.Duration
	t          Target
	buf        []byte // frames' data
	check      []byte // bytes read back
	checkpoint Checkpoint
	cursor     int64   // the next byte expected
	runs       []frame // the segment's frames, without their data
	dataBytes  int64
	keptBytes  int64
	catchUp    bool // the request named a base: keep runs are allowed
}

// run sends the request and receives the stream.
func (rc *receiver) run(ctx context.Context, req Request, targetSize int64) (Result, error) {
	rc.cursor, rc.catchUp = req.From, req.Base != ""
	res := Result{From: req.From}
	_ = rc.conn.SetWriteDeadline(time.Now().Add(rc.idle))
	if err := writeRequest(rc.conn, req); err != nil {
		return res, fmt.Errorf("sending the request: %w", err)
	}
	h, err := rc.next()
	if err != nil {
		return res, err
	}
	if h.kind != kindHeader {
		return res, fmt.Errorf("%w: the stream starts with a frame of kind %d", ErrProtocol, h.kind)
	}
	res.Size = h.off
	if h.off > targetSize || req.From > h.off {
		return res, fmt.Errorf("%w: the source has %d bytes, the target %d, and the transfer starts at %d", ErrProtocol, h.off, targetSize, req.From)
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		f, err := rc.next()
		if err != nil {
			return res, err
		}
		done, err := rc.apply(f, h.off)
		res.DataBytes, res.KeptBytes = rc.dataBytes, rc.keptBytes
		if err != nil || done {
			return res, err
		}
	}
}

// next reads a frame; an error frame is the server's error.
func (rc *receiver) next() (frame, error) {
	_ = rc.conn.SetReadDeadline(time.Now().Add(rc.idle))
	f, err := readFrame(rc.r, rc.buf)
	if errors.Is(err, errBadFrame) {
		return f, fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	if errors.Is(err, io.EOF) {
		return f, fmt.Errorf("the server closed the connection: %w", io.ErrUnexpectedEOF)
	}
	if err != nil {
		return f, err
	}
	if f.kind == kindError {
		return f, remoteError(f.code, f.msg)
	}
	return f, nil
}

// apply acts on one frame of the stream; done is true at its end.
func (rc *receiver) apply(f frame, size int64) (done bool, err error) {
	switch f.kind {
	case kindData, kindZero:
		return false, rc.write(f, size)
	case kindKeep:
		if !rc.catchUp {
			// Left as it was, a new volume would keep what a former
			// LV left on its extents.
			return false, fmt.Errorf("%w: a keep run at %d in a transfer that is not a catch-up", ErrProtocol, f.off)
		}
		return false, rc.write(f, size)
	case kindSegment:
		return false, rc.endSegment(f)
	case kindEnd:
		if f.off != size || rc.cursor != size || len(rc.runs) != 0 {
			return false, fmt.Errorf("%w: the stream ended at %d (its last segment at %d) for a source of %d bytes", ErrProtocol, f.off, rc.cursor, size)
		}
		return true, nil
	}
	return false, fmt.Errorf("%w: a frame of kind %d inside the stream", ErrProtocol, f.kind)
}

// write writes a data or zero frame, or takes a keep run as it is; each
// must start where the last one ended and end within the source.
func (rc *receiver) write(f frame, size int64) error {
	n := f.n
	if f.kind == kindData {
		n = int64(len(f.data))
	}
	end := rc.runEnd()
	if f.off != end || f.off+n > size {
		return fmt.Errorf("%w: a run of %d bytes at %d, expected one at %d within %d bytes", ErrProtocol, n, f.off, end, size)
	}
	if len(rc.runs) >= maxRuns {
		return fmt.Errorf("%w: more than %d frames in one segment", ErrProtocol, maxRuns)
	}
	switch f.kind {
	case kindData:
		if _, err := rc.t.WriteAt(f.data, f.off); err != nil {
			return fmt.Errorf("writing at %d: %w", f.off, err)
		}
		rc.dataBytes += n
	case kindZero:
		if err := rc.t.Zero(f.off, n); err != nil {
			return fmt.Errorf("zeroing %d bytes at %d: %w", n, f.off, err)
		}
	case kindKeep:
		rc.keptBytes += n
	}
	rc.runs = append(rc.runs, frame{kind: f.kind, off: f.off, n: n})
	return nil
}

// runEnd is where the next frame must start: after the segment's last
// frame, or at the cursor.
func (rc *receiver) runEnd() int64 {
	if len(rc.runs) == 0 {
		return rc.cursor
	}
	last := rc.runs[len(rc.runs)-1]
	return last.off + last.n
}

// endSegment flushes the target, reads back what the segment wrote and
// compares its digest with the sender's; only then does the segment
// count, and the checkpoint hear of it.
func (rc *receiver) endSegment(f frame) error {
	if len(rc.runs) == 0 || f.off != rc.runEnd() {
		return fmt.Errorf("%w: a segment end at %d, its frames ending at %d", ErrProtocol, f.off, rc.runEnd())
	}
	if err := rc.t.Sync(); err != nil {
		return fmt.Errorf("flushing before %d: %w", f.off, err)
	}
	var d segmentDigest
	for _, r := range rc.runs {
		if r.kind == kindData {
			r.data = rc.check[:r.n]
			if _, err := rc.t.ReadAt(r.data, r.off); err != nil {
				return fmt.Errorf("reading back %d bytes at %d: %w", r.n, r.off, err)
			}
		}
		d.add(r)
	}
	if sum := d.sum(); !bytes.Equal(sum[:], f.digest[:]) {
		return fmt.Errorf("%w: the segment [%d, %d) reads back with SHA-256 %x, sent as %x", ErrMismatch, rc.cursor, f.off, sum, f.digest)
	}
	rc.cursor, rc.runs = f.off, rc.runs[:0]
	if err := rc.checkpoint(rc.cursor); err != nil {
		return fmt.Errorf("checkpoint at %d: %w", rc.cursor, err)
	}
	klog.V(4).InfoS("Transfer segment checked", "done", rc.cursor)
	return nil
}
