package transfer

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// segmentDigest is the SHA-256 of a segment's data, zero and keep frames, each
// as its kind, offset and length, then a data frame's bytes. Sender and
// receiver compute it alike, the receiver from the bytes it reads back
// from its target.
type segmentDigest struct{ h hash.Hash }

// add adds f to the digest; frames other than data, zero and keep are not
// part of it. A keep run counts by its place alone: the receiver did not
// write it, so there is nothing of it to read back.
func (d *segmentDigest) add(f frame) {
	switch f.kind {
	case kindData:
		d.addRun(kindData, f.off, int64(len(f.data)))
		d.h.Write(f.data)
	case kindZero, kindKeep:
		d.addRun(f.kind, f.off, f.n)
	}
}

// addRun adds a frame's kind, offset and length.
func (d *segmentDigest) addRun(k kind, off, n int64) {
	if d.h == nil {
		d.h = sha256.New()
	}
	var b [17]byte
	b[0] = byte(k)
	binary.BigEndian.PutUint64(b[1:], uint64(off))
	binary.BigEndian.PutUint64(b[9:], uint64(n))
	d.h.Write(b[:])
}

// sum is the digest so far.
func (d *segmentDigest) sum() [32]byte {
	if d.h == nil {
		d.h = sha256.New()
	}
	var s [32]byte
	d.h.Sum(s[:0])
	return s
}

// reset starts the next segment's digest.
func (d *segmentDigest) reset() {
	if d.h != nil {
		d.h.Reset()
	}
}
