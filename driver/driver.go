// Package driver is Carve's CSI layer: the Identity, Controller and Node
// services, their parameters and the mapping of errors to gRPC codes. It
// speaks CSI to the CO and hands volume work to a Backend (the LVM semantics
// in lvmvol, straight in standalone mode) and filesystem work to nodefs.
package driver

import (
	"context"

	"carve.dev/carve/driver/lvmvol"
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
	CreateVolume(ctx context.Context, req lvmvol.CreateRequest) (lvmvol.Volume, error)
	DeleteVolume(ctx context.Context, id lvmvol.ID) error
	GetVolume(ctx context.Context, id lvmvol.ID) (lvmvol.Volume, error)
	ListVolumes(ctx context.Context) ([]lvmvol.Volume, error)
	PublishVolume(ctx context.Context, id lvmvol.ID, node string) (string, error)
	UnpublishVolume(ctx context.Context, id lvmvol.ID, node string) error
	ExpandVolume(ctx context.Context, id lvmvol.ID, requiredBytes, limitBytes int64) (lvmvol.Volume, error)
	Capacity(ctx context.Context, node, vg string, t lvmvol.Type) (lvmvol.Capacity, error)
	CreateSnapshot(ctx context.Context, name string, source lvmvol.ID) (lvmvol.Snapshot, error)
	DeleteSnapshot(ctx context.Context, id lvmvol.ID) error
	GetSnapshot(ctx context.Context, id lvmvol.ID) (lvmvol.Snapshot, error)
	ListSnapshots(ctx context.Context) ([]lvmvol.Snapshot, error)
	// VolumeGroups are the VGs volumes may be carved from; the first is the
	// default when a StorageClass names none.
	VolumeGroups() []string
}

// Prober reports whether the driver can do its work now.
type Prober interface {
	Probe(ctx context.Context) error
}
