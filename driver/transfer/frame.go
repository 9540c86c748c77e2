package transfer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// kind is a frame's first byte.
type kind byte

const (
	kindHeader  kind = 1 // size u64, segment size u64
	kindData    kind = 2 // offset u64, length u32, the bytes
	kindZero    kind = 3 // offset u64, length u64
	kindSegment kind = 4 // end u64, SHA-256 of the segment's frames
	kindEnd     kind = 5 // size u64
	kindError   kind = 6 // code u8, length u16, the message
	kindKeep    kind = 7 // offset u64, length u64 (catch-ups only)
)

// MaxData is the most bytes one data frame carries: the unit the sender
// reads and the receiver writes.
const MaxData = 1 << 20

// maxOffset bounds offsets and lengths: no block device is near 2^62
// bytes, and the bound keeps offset+length from overflowing an int64.
const maxOffset = 1 << 62

// maxMessage bounds an error frame's message.
const maxMessage = 1024

// frame is one frame of the stream. Which fields are set depends on kind:
// header: size, segment; data: off, data; zero and keep: off, n;
// segment: off (the segment's end), digest; end: off (the size); error:
// code, msg.
type frame struct {
	kind    kind
	off, n  int64
	segment int64
	data    []byte
	digest  [32]byte
	code    Code
	msg     string
}

// errBadFrame is a frame that breaks the protocol's rules.
var errBadFrame = errors.New("bad frame")

// writeFrame writes f to w.
func writeFrame(w io.Writer, f frame) error {
	var hdr [1 + 8 + 8]byte
	hdr[0] = byte(f.kind)
	b := hdr[:1]
	switch f.kind {
	case kindHeader:
		b = binary.BigEndian.AppendUint64(b, uint64(f.off))
		b = binary.BigEndian.AppendUint64(b, uint64(f.segment))
	case kindData:
		b = binary.BigEndian.AppendUint64(b, uint64(f.off))
		b = binary.BigEndian.AppendUint32(b, uint32(len(f.data)))
	case kindZero, kindKeep:
		b = binary.BigEndian.AppendUint64(b, uint64(f.off))
		b = binary.BigEndian.AppendUint64(b, uint64(f.n))
	case kindSegment, kindEnd:
		b = binary.BigEndian.AppendUint64(b, uint64(f.off))
	case kindError:
		msg := f.msg
		if len(msg) > maxMessage {
			msg = msg[:maxMessage]
		}
		b = append(b, byte(f.code))
		b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
		b = append(b, msg...)
	default:
		return fmt.Errorf("%w: kind %d", errBadFrame, f.kind)
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	switch f.kind {
	case kindData:
		_, err := w.Write(f.data)
		return err
	case kindSegment:
		_, err := w.Write(f.digest[:])
		return err
	}
	return nil
}

// readFrame reads one frame from r. A data frame's bytes are read into
// buf (MaxData long) and f.data is a slice of it, valid until the next
// call. Every field is checked against the protocol's bounds: a peer's
// bytes never make it allocate, loop or index past them.
func readFrame(r io.Reader, buf []byte) (frame, error) {
	var k [1]byte
	if _, err := io.ReadFull(r, k[:]); err != nil {
		return frame{}, err
	}
	f := frame{kind: kind(k[0])}
	var err error
	switch f.kind {
	case kindHeader:
		if f.off, err = readLength(r); err == nil {
			f.segment, err = readLength(r)
		}
		if err == nil && f.segment <= 0 {
			err = fmt.Errorf("%w: segment size %d", errBadFrame, f.segment)
		}
	case kindData:
		f.data, f.off, err = readData(r, buf)
	case kindZero, kindKeep:
		if f.off, err = readLength(r); err == nil {
			f.n, err = readLength(r)
		}
		if err == nil && f.n == 0 {
			err = fmt.Errorf("%w: empty run of kind %d", errBadFrame, f.kind)
		}
	case kindSegment:
		if f.off, err = readLength(r); err == nil {
			_, err = io.ReadFull(r, f.digest[:])
		}
	case kindEnd:
		f.off, err = readLength(r)
	case kindError:
		f.code, f.msg, err = readError(r)
	default:
		err = fmt.Errorf("%w: unknown kind %d", errBadFrame, f.kind)
	}
	return f, unexpected(err)
}

// readLength reads an offset or length: a u64 below maxOffset.
func readLength(r io.Reader) (int64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	v := binary.BigEndian.Uint64(b[:])
	if v >= maxOffset {
		return 0, fmt.Errorf("%w: offset or length %d out of range", errBadFrame, v)
	}
	return int64(v), nil
}

func readData(r io.Reader, buf []byte) ([]byte, int64, error) {
	off, err := readLength(r)
	if err != nil {
		return nil, 0, err
	}
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return nil, 0, err
	}
	n := binary.BigEndian.Uint32(b[:])
	if n == 0 || n > MaxData || int(n) > len(buf) {
		return nil, 0, fmt.Errorf("%w: data frame of %d bytes", errBadFrame, n)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return nil, 0, err
	}
	return buf[:n], off, nil
}

func readError(r io.Reader) (Code, string, error) {
	var b [3]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, "", err
	}
	code, n := Code(b[0]), binary.BigEndian.Uint16(b[1:])
	if n > maxMessage {
		return 0, "", fmt.Errorf("%w: error message of %d bytes", errBadFrame, n)
	}
	msg := make([]byte, n)
	if _, err := io.ReadFull(r, msg); err != nil {
		return 0, "", err
	}
	if !utf8.Valid(msg) {
		return 0, "", fmt.Errorf("%w: error message is not UTF-8", errBadFrame)
	}
	return code, string(msg), nil
}

// unexpected turns an EOF inside a frame into ErrUnexpectedEOF: only a
// stream that ends between frames ends cleanly.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
