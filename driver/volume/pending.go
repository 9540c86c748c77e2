package volume

import (
	"errors"
	"fmt"

	"carve.dev/carve/lvm"
)

// ErrDataPending: long data work (a copy, a wipe) on the volume runs in the
// background; the call is to be made again later (CSI: ABORTED, an
// operation on the volume is in progress). Only a Manager with
// BackgroundDataWork set answers it.
var ErrDataPending = errors.New("data work in progress")

// PendingError tells which work runs and how far it has got; it is
// ErrDataPending.
type PendingError struct {
	// Work is "copy", "wipe" or WorkSync.
	Work string
	// LV is the LV written, vg/lv.
	LV string
	// Done of Total bytes are done.
	Done, Total int64
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("%s of %s runs in the background: %s of %s done (%d%%)", e.Work, e.LV,
		lvm.FormatSize(uint64(max(e.Done, 0))), lvm.FormatSize(uint64(max(e.Total, 0))), e.Percent())
}

// WorkSync is the kernel's copy of a raid1 volume onto its new legs
// (ModifyVolume).
const WorkSync = "raid1 sync"

// Percent done, rounded down.
func (e *PendingError) Percent() int64 {
	if e.Total <= 0 {
		return 0
	}
	return min(100, e.Done*100/e.Total)
}

// Is makes a PendingError ErrDataPending.
func (e *PendingError) Is(target error) bool { return target == ErrDataPending }
