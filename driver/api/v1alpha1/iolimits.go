package v1alpha1

import "carve.dev/carve/driver/volume"

// LimitsOf is l as the resource writes it. The limits Carve accepts are
// below 2^62, so they fit.
func LimitsOf(l volume.IOLimits) IOLimits {
	return IOLimits{ReadBytesPerSecond: int64(l.ReadBPS), WriteBytesPerSecond: int64(l.WriteBPS),
		ReadIOPS: int64(l.ReadIOPS), WriteIOPS: int64(l.WriteIOPS)}
}

// Volume is l as Carve's volumes hold it; a negative value (the schema
// refuses one) is no limit.
func (l IOLimits) Volume() volume.IOLimits {
	u := func(n int64) uint64 { return uint64(max(n, 0)) }
	return volume.IOLimits{ReadBPS: u(l.ReadBytesPerSecond), WriteBPS: u(l.WriteBytesPerSecond),
		ReadIOPS: u(l.ReadIOPS), WriteIOPS: u(l.WriteIOPS)}
}
