// Package transfer copies a volume's bytes from one node to another: the
// node agent holding the source (a snapshot, or a volume to clone) serves
// it, and the agent of the node where the new volume was carved receives
// it into that volume's device. It is what lets a snapshot be restored, or
// a claim cloned, onto another node than its source's.
//
// # Security
//
// Only over TLS 1.3 with mutual authentication: each node has a
// certificate of its own, signed by one CA that the deployment provides,
// whose one DNS name is the node's name (Credentials). The receiver checks
// that the server is the source's node (the name it dialled for); the
// server knows the receiver by its certificate's name and asks its
// Authorizer whether that node may read that source: the agent answers
// from the cluster's state (the LogicalVolume the request names is on that
// node and names the source as its content), so a node can read only
// what it was asked to copy.
// There is no port in clear text and no request without a certificate.
//
// # The protocol (version 1, ALPN "carve-transfer/1")
//
// The receiver sends one request (request.go): the source's ID, the
// LogicalVolume it fills and the byte to start from. The server answers with a header frame (the
// source's size and its segment size) or an error frame, then streams the
// source from that byte to its end as frames (frame.go):
//
//   - data: bytes at an offset, at most MaxData of them;
//   - zero: a run that reads as zeroes: unallocated in a thin source, or
//     read and found all zero in a thick one; the receiver zeroes it
//     (Target.Zero) rather than receive it;
//   - keep: a run the receiver leaves as it is, only in a catch-up (below);
//   - segment: the end of a segment (SegmentSize bytes, the first one cut
//     at the start offset) with the SHA-256 of the segment's frames;
//   - end: the source's size, after its last segment;
//   - error: why the server stopped, with a code (refused, not found,
//     busy, failed).
//
// Frames run in order with no gap and no overlap: each starts where the
// one before ended. The receiver refuses anything else.
//
// # Catch-ups
//
// A request may name a base as well as the source: an earlier snapshot of
// the same volume on the server's node, whose bytes the target already
// holds (a move's first copy). The server then sends only the ranges that
// may differ between base and source (a thin snapshot's changed chunks,
// from its pool's metadata; all of a thick one, whose snapshots record no
// delta) and keep runs for the rest. A receiver that did not name a base
// refuses a keep run: a new volume left as it is would show what a former
// LV left on its extents. A catch-up is checked per segment and resumed as
// a copy is: its data and zero runs are the source's bytes wherever they
// land, so a segment written again reads the same.
//
// # Checked end to end
//
// TLS protects the bytes on the wire. What the receiver wrote is checked
// too: at each segment's end it flushes the target, reads back what the
// segment's data frames wrote, and computes the segment's digest from what
// it read; a digest that differs from the sender's stops the transfer
// (ErrMismatch) before the segment counts as done.
//
// # Resuming
//
// A segment counts as done once it is flushed and checked: only then is
// the receiver's checkpoint told (the agent records the offset in the
// new volume's LV tags, as a local copy does, progress.go in lvmvol). A
// transfer cut by a dropped connection, a restarted agent on either side
// or a crash asks again from the last checkpoint; the bytes of the
// segment that was cut are sent again. The server keeps no state between
// connections.
package transfer
