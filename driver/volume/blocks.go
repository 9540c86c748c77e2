package volume

// Block metadata of snapshots: which byte ranges of a snapshot hold data,
// and which differ between two snapshots of one volume (the CSI
// SnapshotMetadata service, changed-block tracking).

// Range is a run of bytes of a volume or snapshot: Length bytes from
// Offset.
type Range struct {
	Offset, Length int64
}

// End is the offset just past r.
func (r Range) End() int64 { return r.Offset + r.Length }

// BlockSink receives a snapshot's block metadata as it is read, so that
// no reader holds a large volume's ranges at once. Start is called once,
// before any Range, with the capacity of the snapshot's volume in bytes;
// Range then with each range in increasing order of offset, none
// overlapping, each ending after the offset the read was asked from. An
// error from either ends the read and is the read's error.
type BlockSink interface {
	Start(capacityBytes int64) error
	Range(r Range) error
}
