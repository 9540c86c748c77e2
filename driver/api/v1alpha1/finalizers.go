package v1alpha1

// Finalizers the node agent puts on the resources it acts on, and the
// controller sets at creation, so that a resource is never gone while its
// LV may still exist.
const (
	// VolumeFinalizer holds a LogicalVolume until its LV is removed.
	VolumeFinalizer = "lvm.carve.dev/logical-volume"
	// SnapshotFinalizer holds a LogicalVolumeSnapshot until its LV is
	// removed.
	SnapshotFinalizer = "lvm.carve.dev/snapshot"
	// GroupSnapshotFinalizer holds a LogicalVolumeGroupSnapshot until its
	// members' LVs are removed.
	GroupSnapshotFinalizer = "lvm.carve.dev/group-snapshot"
)
