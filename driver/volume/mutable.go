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
}

// IsZero tells a change of nothing.
func (m Mutable) IsZero() bool { return m.Mirrors == nil && !m.ChangesLimits() }
