// Package csi is Carve's CSI layer: the Identity, Controller and Node
// services, their parameters, and the gRPC server that maps errors to codes
// (volume.CodeOf). It speaks CSI to the CO and hands volume work to a
// Backend (the LVM semantics in lvmvol in standalone mode, the controller
// backend over resources in cluster mode; cmd/carve wires either in) and
// filesystem work to nodefs. It imports neither backend: only the volume
// model and the layers below.
//
// Inside this package, "csi." is the CSI specification's Go package.
package csi

import (
	"context"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

const (
	// Name is the CSI driver name.
	Name = "lvm.carve.dev"
	// TopologyKey is the one topology segment: volumes live on one node.
	TopologyKey = "topology.lvm.carve.dev/node"
	// publishDeviceKey carries the device path in the publish context.
	publishDeviceKey = "devicePath"
)

// Backend carries out the controller's volume operations. In standalone mode
// it is lvmvol.Manager on this node's LVM; cluster mode puts its own
// transport behind the same interface.
type Backend interface {
	CreateVolume(ctx context.Context, req volume.CreateRequest) (volume.Volume, error)
	DeleteVolume(ctx context.Context, id volume.ID) error
	// The reads say how fresh their answer must be (lvm.Reads): the
	// queries the CO polls pass lvm.Cached (see getVolume). The LVM
	// backend honours it; the cluster backend, answering from its
	// informers' cache, has no use for it.
	GetVolume(ctx context.Context, r lvm.Reads, id volume.ID) (volume.Volume, error)
	ListVolumes(ctx context.Context, r lvm.Reads) ([]volume.Volume, error)
	PublishVolume(ctx context.Context, id volume.ID, node string) (string, error)
	UnpublishVolume(ctx context.Context, id volume.ID, node string) error
	ExpandVolume(ctx context.Context, id volume.ID, requiredBytes, limitBytes int64) (volume.Volume, error)
	// Capacity is what volumes of type t can get from the VGs of vgs on
	// node (volume.CapacityOfChoice).
	Capacity(ctx context.Context, node string, vgs volume.VGChoice, t volume.Type) (volume.Capacity, error)
	CreateSnapshot(ctx context.Context, name string, source volume.ID) (volume.Snapshot, error)
	DeleteSnapshot(ctx context.Context, id volume.ID) error
	GetSnapshot(ctx context.Context, r lvm.Reads, id volume.ID) (volume.Snapshot, error)
	ListSnapshots(ctx context.Context, r lvm.Reads) ([]volume.Snapshot, error)
	// VolumeGroups are the VGs volumes may be carved from; the first is the
	// default when a StorageClass names none.
	VolumeGroups() []string
}

// Modifier is a Backend that changes live volumes (MODIFY_VOLUME): the
// Controller advertises the capability only when its backend is one.
type Modifier interface {
	// ModifyVolume brings the volume to m (nil fields: as they are) and
	// returns once it is there; the same change again is a no-op.
	ModifyVolume(ctx context.Context, id volume.ID, m volume.Mutable) (volume.Volume, error)
}

// RecordKeeper is a Backend that keeps a record of each volume beside
// its LV (cluster mode's LogicalVolumes), so that a volume whose LV is
// lost can be recreated blank (recreateBlankWhenLost).
type RecordKeeper interface {
	KeepsRecords()
}

// Prober reports whether the driver can do its work now.
type Prober interface {
	Probe(ctx context.Context) error
}
