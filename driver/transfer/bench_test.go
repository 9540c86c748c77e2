package transfer

import (
	"context"
	crand "crypto/rand"
	"testing"
)

// benchImage is a thick source of 64 MiB of random bytes: every byte
// travels as data (zero runs would flatter the figure).
func benchImage(b *testing.B) image {
	im := image{data: make([]byte, 64*mib)}
	if _, err := crand.Read(im.data); err != nil {
		b.Fatal(err)
	}
	return im
}

// BenchmarkTransfer is the whole transfer over loopback at the segment
// size carve node uses: the server's reads and digests, TLS 1.3 both
// ways, the client's writes, flush, read-back and digest, into a file.
// Its MB/s is what the transfer itself costs this CPU; run in the VM
// (an emulated CPU without AES instructions) it bounds what a copy
// between the e2e's VM nodes can reach.
func BenchmarkTransfer(b *testing.B) {
	im := benchImage(b)
	w := newWorld(b, im, func(c *ServerConfig) { c.SegmentSize = defaultSegment })
	size := int64(len(im.data))
	target := newTarget(b, len(im.data))
	b.SetBytes(size)
	for b.Loop() {
		if _, err := w.client.Receive(context.Background(), w.addr, "node-a", Request{Source: sourceID, For: "pvc-1"},
			target, size, func(int64) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSegmentDigest is the digest alone, which each side computes
// once per byte sent (the receiver over what it reads back).
func BenchmarkSegmentDigest(b *testing.B) {
	data := benchImage(b).data[:MaxData]
	b.SetBytes(int64(len(data)))
	var d segmentDigest
	for b.Loop() {
		d.add(frame{kind: kindData, data: data})
	}
}
