package volume

import (
	"fmt"

	"carve.dev/carve/lvm"
)

// SettleSourceVG fixes the VG of a volume made from a source (restore,
// clone): the source's, since a thin snapshot and a copy's frozen point
// stay inside one VG. A request that names none gets the source's; one
// that names another is ErrSourceMismatch. A request without a source is
// left as it is.
func (r *CreateRequest) SettleSourceVG() error {
	if r.Source == nil {
		return nil
	}
	if r.VG == "" {
		r.VG = r.Source.ID.VG
	}
	if r.VG != r.Source.ID.VG {
		return fmt.Errorf("volume group %s asked, but the source lives in %s: %w", r.VG, r.Source.ID.VG, ErrSourceMismatch)
	}
	return nil
}

// CheckNoShrink refuses an expansion whose limit is below the volume's
// size (ErrOutOfRange): no filesystem Carve formats can shrink online, and
// an LV cut short loses what its end holds. Standalone mode and the
// controller in cluster mode both apply it before anything changes.
func CheckNoShrink(id ID, size uint64, limitBytes int64) error {
	if limitBytes > 0 && uint64(limitBytes) < size {
		return fmt.Errorf("volume %s is %s; shrinking to at most %s is not supported: %w",
			id, lvm.FormatSize(size), lvm.FormatSize(uint64(limitBytes)), ErrOutOfRange)
	}
	return nil
}
