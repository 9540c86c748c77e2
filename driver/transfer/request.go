package transfer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/util/validation"

	"carve.dev/carve/driver/volume"
)

// Request is what a receiver asks a server for.
type Request struct {
	// Version of the protocol: 1.
	Version int `json:"version"`
	// Source is the volume or snapshot to read, a Carve volume ID on the
	// server's node.
	Source string `json:"source"`
	// For names the LogicalVolume the transfer fills: the server's
	// Authorizer reads it to see that it is on the peer's node and made
	// from Source.
	For string `json:"for"`
	// From is the first byte to send: 0, or where a cut transfer's last
	// checkpoint was.
	From int64 `json:"from"`
	// Base, when set, makes the transfer a catch-up: the target already
	// holds Base (an earlier snapshot of the same volume, on the same
	// node), and the server sends only what may differ between Base and
	// Source; the rest is sent as keep runs, which the receiver leaves as
	// they are.
	Base string `json:"base,omitempty"`
}

// protocolVersion is Request.Version.
const protocolVersion = 1

// maxRequest bounds a request's encoding.
const maxRequest = 4096

// writeRequest sends req, its JSON after its length (u16).
func writeRequest(w io.Writer, req Request) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if len(b) > maxRequest {
		return fmt.Errorf("request of %d bytes: at most %d", len(b), maxRequest)
	}
	out := binary.BigEndian.AppendUint16(nil, uint16(len(b)))
	_, err = w.Write(append(out, b...))
	return err
}

// readRequest reads and checks a request. Unknown fields, a wrong
// version, an invalid ID or a negative start are ErrProtocol.
func readRequest(r io.Reader) (Request, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return Request{}, fmt.Errorf("reading the request: %w", err)
	}
	size := binary.BigEndian.Uint16(n[:])
	if size == 0 || size > maxRequest {
		return Request{}, fmt.Errorf("%w: request of %d bytes", ErrProtocol, size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return Request{}, fmt.Errorf("reading the request: %w", unexpected(err))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var req Request
	if err := dec.Decode(&req); err != nil {
		return Request{}, fmt.Errorf("%w: request: %w", ErrProtocol, err)
	}
	if dec.More() {
		return Request{}, fmt.Errorf("%w: request: data after the JSON object", ErrProtocol)
	}
	return req, req.check()
}

// check refuses a request a server must not act on.
func (r Request) check() error {
	if r.Version != protocolVersion {
		return fmt.Errorf("%w: version %d, this node speaks %d", ErrProtocol, r.Version, protocolVersion)
	}
	if _, err := volume.ParseID(r.Source); err != nil {
		return fmt.Errorf("%w: source %q: %w", ErrProtocol, r.Source, err)
	}
	if errs := validation.IsDNS1123Subdomain(r.For); len(errs) > 0 {
		return fmt.Errorf("%w: for %q: %v", ErrProtocol, r.For, errs)
	}
	if err := r.checkBase(); err != nil {
		return err
	}
	if r.From < 0 || r.From >= maxOffset {
		return fmt.Errorf("%w: from %d", ErrProtocol, r.From)
	}
	return nil
}

// checkBase checks a catch-up's base: a snapshot of the source's node,
// not the source itself.
func (r Request) checkBase() error {
	if r.Base == "" {
		return nil
	}
	base, err := volume.ParseID(r.Base)
	if err != nil {
		return fmt.Errorf("%w: base %q: %w", ErrProtocol, r.Base, err)
	}
	src, _ := volume.ParseID(r.Source) // checked before
	if base.Node != src.Node || base == src {
		return fmt.Errorf("%w: base %s is not another snapshot of the node of %s", ErrProtocol, r.Base, r.Source)
	}
	return nil
}
