package volume

// Mutable is what ControllerModifyVolume may change of a volume that
// exists (CSI's mutable parameters, a VolumeAttributesClass in
// Kubernetes). A nil field leaves that property as it is: CSI asks that
// only the keys given change anything.
type Mutable struct {
	// Mirrors is the raid1 legs beyond the first: 0 makes the volume
	// linear. Only thick linear and raid1 volumes can change it.
	Mirrors *int
	// ReadBPS, WriteBPS, ReadIOPS and WriteIOPS are the volume's IO
	// limits (IOLimits; 0 lifts one). Any volume can change them.
	ReadBPS, WriteBPS, ReadIOPS, WriteIOPS *uint64
	// WriteCache is the volume's write cache: a Size of 0 detaches it.
	// Only thick volumes without raid1 legs can have one.
	WriteCache *WriteCache
}

// WriteCache is a dm-writecache in front of a thick volume: Size bytes on
// the fast PVs On names ("/dev/nvme1n1", or "@tag" for the PVs with that
// lvm2 tag) of the volume's VG. Writes land there first and reach the
// volume's own PVs in the background; detaching it writes them all back
// first.
type WriteCache struct {
	Size uint64
	On   []string
}

// IsZero tells a change of nothing.
func (m Mutable) IsZero() bool { return m.Mirrors == nil && !m.ChangesLimits() && m.WriteCache == nil }
