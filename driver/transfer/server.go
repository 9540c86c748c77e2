package transfer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/volume"
)

// Source is what a server reads: a volume's or a snapshot's device on its
// node, opened for one transfer.
type Source interface {
	io.ReaderAt
	// Size is the source's size in bytes.
	Size() int64
	// Allocated calls each with the ranges that may hold data, in
	// increasing order, none overlapping, each ending after from; the
	// bytes outside them read as zeroes. A source that does not know (a
	// thick volume) calls each once with the whole source. A source
	// opened for a catch-up (Request.Base) calls each with the ranges
	// that may differ from the base instead; the bytes outside them are
	// the base's.
	Allocated(ctx context.Context, from int64, each func(volume.Range) error) error
	// Close ends the transfer's use of the source.
	Close() error
}

// Authorizer opens req's source for the node peer, or refuses: an error
// wrapping ErrRefused when peer may not read it, one wrapping a not-found
// sentinel of package volume when there is no such source.
type Authorizer func(ctx context.Context, peer string, req Request) (Source, error)

// ServerConfig configures a Server.
type ServerConfig struct {
	// Keyring holds the node's credentials.
	Keyring   *Keyring
	Authorize Authorizer
	// MaxTransfers is how many transfers run at once (default 4); one
	// more is answered busy. Each reads its source at full speed: more
	// would only share the disk and the network between them.
	MaxTransfers int
	// Idle is how long a connection may block (a handshake, a write)
	// before it is dropped (default 2 minutes): a receiver gone without a
	// word frees its slot.
	Idle time.Duration
	// SegmentSize is the unit of the receiver's checks and checkpoints
	// (default 64 MiB).
	SegmentSize int64
}

// Server serves sources to receivers on other nodes.
type Server struct {
	cfg   ServerConfig
	slots chan struct{}
	wg    sync.WaitGroup
}

const (
	defaultMaxTransfers = 4
	defaultIdle         = 2 * time.Minute
	defaultSegment      = 64 << 20
)

// NewServer makes a server; Serve starts it.
func NewServer(cfg ServerConfig) *Server {
	if cfg.MaxTransfers <= 0 {
		cfg.MaxTransfers = defaultMaxTransfers
	}
	if cfg.Idle <= 0 {
		cfg.Idle = defaultIdle
	}
	if cfg.SegmentSize <= 0 {
		cfg.SegmentSize = defaultSegment
	}
	return &Server{cfg: cfg, slots: make(chan struct{}, cfg.MaxTransfers)}
}

// Serve accepts connections on l until ctx ends, then closes l and waits
// for the transfers it serves to stop.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	defer s.wg.Wait()
	// Each handshake takes the credentials current then.
	tl := tls.NewListener(l, &tls.Config{MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := s.cfg.Keyring.Get()
			if err := c.ready(); err != nil {
				return nil, err
			}
			return c.serverConfig(), nil
		}})
	for {
		c, err := tl.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("transfer server: %w", err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(ctx, c.(*tls.Conn))
		}()
	}
}

// serveConn serves one transfer. Its errors end the connection and are
// logged here: the receiver learns them from an error frame.
func (s *Server) serveConn(ctx context.Context, c *tls.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Any stop (the server's, the receiver's close seen by a write) ends
	// the connection, which unblocks a read or write in progress.
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(s.cfg.Idle))
	if err := c.HandshakeContext(ctx); err != nil {
		klog.V(2).InfoS("Transfer connection refused in the TLS handshake", "remote", c.RemoteAddr(), "err", err)
		return
	}
	peer, err := peerNode(c.ConnectionState())
	if err != nil {
		klog.InfoS("Transfer connection refused", "remote", c.RemoteAddr(), "err", err)
		return
	}
	w := bufio.NewWriterSize(c, MaxData+64)
	req, err := readRequest(c)
	if err == nil {
		err = s.send(ctx, c, w, peer, req)
	}
	if err != nil {
		klog.InfoS("Transfer stopped", "peer", peer, "source", req.Source, "from", req.From, "err", err)
		if werr := writeFrame(w, frame{kind: kindError, code: codeOf(err), msg: err.Error()}); werr == nil {
			_ = w.Flush()
		}
	}
}

// send answers one request: a slot, the source opened through the
// Authorizer, the header, then the stream.
func (s *Server) send(ctx context.Context, c *tls.Conn, w *bufio.Writer, peer string, req Request) error {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		return fmt.Errorf("%w (%d running)", ErrBusy, s.cfg.MaxTransfers)
	}
	src, err := s.cfg.Authorize(ctx, peer, req)
	if err != nil {
		return fmt.Errorf("source %s for node %s: %w", req.Source, peer, err)
	}
	defer func() { _ = src.Close() }()
	size := src.Size()
	if req.From > size {
		return fmt.Errorf("%w: from %d is past the source's %d bytes", ErrProtocol, req.From, size)
	}
	klog.InfoS("Transfer started", "peer", peer, "source", req.Source, "base", req.Base, "from", req.From, "bytes", size)
	start := time.Now()
	st := &stream{w: w, conn: c, idle: s.cfg.Idle, segment: s.cfg.SegmentSize, size: size, cursor: req.From, gap: kindZero}
	if req.Base != "" {
		// A catch-up: what lies between the source's ranges is the
		// base's, which the receiver holds.
		st.gap = kindKeep
	}
	if err := writeFrame(w, frame{kind: kindHeader, off: size, segment: s.cfg.SegmentSize}); err != nil {
		return err
	}
	if err := st.run(ctx, src); err != nil {
		return err
	}
	klog.InfoS("Transfer sent", "peer", peer, "source", req.Source, "base", req.Base, "from", req.From, "bytes", size,
		"dataBytes", st.dataBytes, "duration", time.Since(start))
	return nil
}

// stream writes a source as frames, cutting them at segment boundaries
// and closing each segment with its digest.
type stream struct {
	w         *bufio.Writer
	conn      net.Conn
	idle      time.Duration
	segment   int64
	size      int64
	cursor    int64 // the next byte to send
	gap       kind  // what the bytes between the source's ranges are sent as: zero, or keep for a catch-up
	digest    segmentDigest
	buf       []byte
	dataBytes int64 // bytes sent in data frames
}

// run sends the source from the cursor to its end.
func (st *stream) run(ctx context.Context, src Source) error {
	st.buf = make([]byte, MaxData)
	err := src.Allocated(ctx, st.cursor, func(r volume.Range) error {
		if r.Offset < st.cursor {
			r = volume.Range{Offset: st.cursor, Length: r.End() - st.cursor}
		}
		if r.Length <= 0 || r.End() > st.size {
			return fmt.Errorf("the source's allocated range %d+%d is outside [%d, %d)", r.Offset, r.Length, st.cursor, st.size)
		}
		if err := st.skip(r.Offset); err != nil {
			return err
		}
		return st.data(ctx, src, r.End())
	})
	if err != nil {
		return err
	}
	if err := st.skip(st.size); err != nil {
		return err
	}
	return st.put(frame{kind: kindEnd, off: st.size})
}

// skip sends [cursor, to), which is outside the source's ranges, as gap
// frames: zero runs, or keep runs in a catch-up.
func (st *stream) skip(to int64) error {
	for st.cursor < to {
		n := min(to, st.segmentEnd()) - st.cursor
		if err := st.put(frame{kind: st.gap, off: st.cursor, n: n}); err != nil {
			return err
		}
		if err := st.advance(n); err != nil {
			return err
		}
	}
	return nil
}

// data reads [cursor, to) from src and sends it, a chunk that reads as
// all zeroes as a zero frame (in a catch-up too: the receiver zeroes it,
// whatever the base held there).
func (st *stream) data(ctx context.Context, src Source, to int64) error {
	for st.cursor < to {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(to, st.segmentEnd(), st.cursor+MaxData) - st.cursor
		b := st.buf[:n]
		if _, err := src.ReadAt(b, st.cursor); err != nil {
			return fmt.Errorf("reading the source at %d: %w", st.cursor, err)
		}
		f := frame{kind: kindData, off: st.cursor, data: b}
		if allZero(b) {
			f = frame{kind: kindZero, off: st.cursor, n: n}
		} else {
			st.dataBytes += n
		}
		if err := st.put(f); err != nil {
			return err
		}
		if err := st.advance(n); err != nil {
			return err
		}
	}
	return nil
}

// advance moves the cursor past n bytes just sent, closing the segment
// when it reaches its end.
func (st *stream) advance(n int64) error {
	end := st.segmentEnd()
	st.cursor += n
	if st.cursor != end {
		return nil
	}
	f := frame{kind: kindSegment, off: st.cursor, digest: st.digest.sum()}
	st.digest.reset()
	return st.put(f)
}

// segmentEnd is the end of the segment the cursor is in: the next
// multiple of the segment size, or the source's end.
func (st *stream) segmentEnd() int64 {
	return min(st.size, (st.cursor/st.segment+1)*st.segment)
}

// put writes f, adding it to the segment's digest; a segment's end is
// flushed, so that the receiver can check and checkpoint it.
func (st *stream) put(f frame) error {
	st.digest.add(f)
	_ = st.conn.SetWriteDeadline(time.Now().Add(st.idle))
	if err := writeFrame(st.w, f); err != nil {
		return fmt.Errorf("sending at %d: %w", st.cursor, err)
	}
	if f.kind == kindSegment || f.kind == kindEnd {
		if err := st.w.Flush(); err != nil {
			return fmt.Errorf("sending at %d: %w", st.cursor, err)
		}
	}
	return nil
}

// zeroes is MaxData zero bytes, for allZero.
var zeroes = make([]byte, MaxData)

// allZero tells whether b (at most MaxData long) holds only zero bytes;
// bytes.Equal compares with vector instructions.
func allZero(b []byte) bool { return bytes.Equal(b, zeroes[:len(b)]) }
