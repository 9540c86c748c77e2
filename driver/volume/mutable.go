package volume

// Mutable is what ControllerModifyVolume may change of a volume that
// exists (CSI's mutable parameters, a VolumeAttributesClass in
// Kubernetes). A nil field leaves that property as it is: CSI asks that
// only the keys given change anything.
type Mutable struct {
	// Mirrors is the raid1 legs beyond the first: 0 makes the volume
	// linear. Only thick linear and raid1 volumes can change it.
	Mirrors *int
}

// IsZero tells a change of nothing.
func (m Mutable) IsZero() bool { return m.Mirrors == nil }
