package volume

// Type is the kind of LV a volume is: thick linear (the zero value),
// striped, raid1, or thin in an administrator's pool.
type Type struct {
	Stripes    int
	StripeSize uint64
	Mirrors    int
	ThinPool   string
}

// IsThin tells a thin volume.
func (t Type) IsThin() bool { return t.ThinPool != "" }

// DefaultOverprovision is the thin over-provisioning ratio when the
// administrator sets none: thin volumes may promise this many times the
// pool's free space.
const DefaultOverprovision = 1.0

// ThinRoom is what thin volumes may still be promised in a pool with free
// bytes of data space: the free space times the over-provisioning ratio.
// GetCapacity (CapacityOf) and the check before a create both use it.
func ThinRoom(free uint64, overprovision float64) uint64 {
	return uint64(float64(free) * overprovision)
}
