package volume

import "errors"

// Carve's sentinel errors. Every layer returns plain Go errors that wrap
// one of these (or one of package lvm's); CodeOf (codes.go) turns them into
// gRPC codes, the one place where that mapping lives.

var (
	// Kinds of failure the CSI layer finds in a request itself.
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrNotFound           = errors.New("not found")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrResourceExhausted  = errors.New("resource exhausted")
	ErrUnimplemented      = errors.New("not implemented")
	// ErrOperationPending: another operation holds the volume (CSI: ABORTED).
	ErrOperationPending = errors.New("an operation on this volume is in progress")
	// ErrInvalidToken: a ListVolumes or ListSnapshots starting token that was
	// never handed out (CSI: ABORTED).
	ErrInvalidToken = errors.New("invalid starting token")
	// ErrOffsetOutOfRange: a SnapshotMetadata starting_offset that is
	// negative or past the snapshot's size (CSI: OUT_OF_RANGE).
	ErrOffsetOutOfRange = errors.New("starting offset out of range")

	// Volumes and snapshots on LVM.
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
	// ErrVGUnreadable: a served VG cannot be read (its disks are missing or
	// failing), so whether a volume in it exists is unknown: never "not
	// found", which a CO takes as deleted.
	ErrVGUnreadable = errors.New("volume group cannot be read")
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

	// Filesystems and paths on the node.
	// ErrMountConflict means the target is already a mount point, but not of
	// what was asked (another device, another directory, other read-only
	// mode).
	ErrMountConflict = errors.New("mount conflict")
	// ErrFilesystemMismatch means the device already holds a filesystem (or
	// a partition table or other signature) that is not the one asked for.
	// Such a device is never reformatted.
	ErrFilesystemMismatch = errors.New("filesystem mismatch")
	// ErrUnsupportedFilesystem: a filesystem type Carve does not make.
	ErrUnsupportedFilesystem = errors.New("unsupported filesystem type")
	// ErrToolMissing: the node lacks the tools of the asked filesystem.
	ErrToolMissing = errors.New("filesystem tools not installed on this node")
	// ErrCannotFormat means a blank device cannot be given the asked
	// filesystem: mkfs refused it (too small for xfs, say), or the mount was
	// asked read-only, which leaves no way to format it.
	ErrCannotFormat = errors.New("cannot format the device")
	// ErrFilesystemDamaged: the device's filesystem has errors its
	// automatic check (fsck -a, before every mount) would not repair; it is
	// not mounted until an operator repairs it.
	ErrFilesystemDamaged = errors.New("the filesystem has errors that need a manual repair")
	// ErrBadMountFlag means a mount flag the CO asked for is not one the
	// filesystem takes, or one that would change what mount does rather
	// than how the volume is mounted.
	ErrBadMountFlag = errors.New("mount flag not accepted")
	// ErrUnsafeTarget: a path holds something that is not Carve's.
	ErrUnsafeTarget = errors.New("path holds something that is not Carve's")
	// ErrInvalidPath marks a path the node refuses to act on.
	ErrInvalidPath = errors.New("invalid path")
	// ErrWrongKey: the passphrase given for an encrypted volume opens none
	// of its keyslots. Nothing was changed (CSI: PERMISSION_DENIED; see
	// codes.go).
	ErrWrongKey = errors.New("the key does not open the encrypted volume")
)
