package volume

import "fmt"

// Type is the kind of LV a volume is: thick linear (the zero value),
// striped, raid1 (Mirrors > 0, with Integrity or not), raid5, raid6 or
// raid10 (RAID, with Stripes data stripes), or thin in an administrator's
// pool. The fields mean what lvm.CreateLVOptions's do.
type Type struct {
	Stripes    int
	StripeSize uint64
	Mirrors    int
	ThinPool   string
	// RAID is lvm.RAID5, lvm.RAID6 or lvm.RAID10; "" for the other types.
	RAID string
	// Integrity: dm-integrity under each raid1 leg.
	Integrity bool
}

// IsThin tells a thin volume.
func (t Type) IsThin() bool { return t.ThinPool != "" }

// CanCache refuses a write cache (WriteCache) for a volume of type t, as
// INVALID_ARGUMENT: a thin volume (lvm2 caches the pool, not its
// volumes) and a raid1 one (its legs could no longer change). The
// StorageClass check, standalone mode and cluster mode's controller all
// judge by it.
func (t Type) CanCache() error {
	switch {
	case t.IsThin():
		return fmt.Errorf("%w: a thin volume cannot have a write cache (writeCache); only thick volumes can", ErrInvalidArgument)
	case t.Mirrors > 0:
		return fmt.Errorf("%w: a raid1 volume cannot have a write cache (writeCache): make it linear first (mirrors=0)", ErrInvalidArgument)
	case t.RAID != "":
		// lvm2 could cache one, but Carve has not tested it: refused
		// rather than promised.
		return fmt.Errorf("%w: a %s volume cannot have a write cache (writeCache)", ErrInvalidArgument, t.RAID)
	}
	return nil
}

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
