package lvmvol

import "errors"

// Errors callers map to CSI codes (driver/errors.go does it, in one place).
// Failures of lvm itself keep lvm's own sentinels (lvm.ErrNoSpace, ...).
var (
	ErrVolumeNotFound   = errors.New("volume not found")
	ErrSnapshotNotFound = errors.New("snapshot not found")
	ErrNodeNotFound     = errors.New("node not found")
	// ErrNameConflict: a volume of that name exists with other arguments, or
	// an LV of that name exists that Carve does not manage.
	ErrNameConflict = errors.New("volume exists with different arguments")
	// ErrOutOfRange: no size within the requested range can be carved.
	ErrOutOfRange = errors.New("capacity range cannot be satisfied")
	// ErrInUse: the volume is open or published and cannot change state.
	ErrInUse = errors.New("volume in use")
	// ErrUnmanagedVG: the request names a VG this node does not serve.
	ErrUnmanagedVG = errors.New("volume group not managed")
	// ErrWrongNode: the request wants a node this manager does not serve
	// (CSI: RESOURCE_EXHAUSTED, so that the CO looks elsewhere).
	ErrWrongNode = errors.New("cannot carve on the requested node")
	// ErrPublishLimit: the node has as many volumes published as it may.
	ErrPublishLimit = errors.New("attach limit reached")
	// ErrBadPool: the named thin pool is missing, not a pool, or unsafe.
	ErrBadPool = errors.New("unusable thin pool")
	// ErrSourceMismatch: the content source cannot serve the request as
	// asked (another VG than the source's).
	ErrSourceMismatch = errors.New("content source does not match the request")
	// ErrNotManaged: an LV without Carve's tag was asked for by ID.
	ErrNotManaged = errors.New("logical volume not managed by carve")
)
