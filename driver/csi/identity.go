package csi

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"carve.dev/carve/driver/volume"
)

// Identity is the CSI Identity service.
type Identity struct {
	csi.UnimplementedIdentityServer
	version    string
	controller bool
	groups     bool
	// snapshotMetadata: the server serves the SnapshotMetadata service.
	snapshotMetadata bool
	prober           Prober
}

// AdvertiseGroups makes the identity advertise the GroupController
// service (Controller.ServesGroups).
func (i *Identity) AdvertiseGroups() { i.groups = true }

// AdvertiseSnapshotMetadata makes the identity advertise the
// SnapshotMetadata service (NewServer, when it registers one).
func (i *Identity) AdvertiseSnapshotMetadata() { i.snapshotMetadata = true }

// NewIdentity describes a driver of version that serves the controller
// service when controller is true.
func NewIdentity(version string, controller bool, p Prober) *Identity {
	return &Identity{version: version, controller: controller, prober: p}
}

func (i *Identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: Name, VendorVersion: i.version}, nil
}

func (i *Identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	caps := []*csi.PluginCapability{pluginCap(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)}
	if i.controller {
		caps = append(caps, pluginCap(csi.PluginCapability_Service_CONTROLLER_SERVICE),
			// Online: LVs grow while published, filesystems while mounted.
			&csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{
				VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}})
	}
	if i.controller && i.groups {
		caps = append(caps, pluginCap(csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE))
	}
	if i.snapshotMetadata {
		// Served where the snapshots' LVs are, with or without the
		// controller service (carve node serves it, carve controller not).
		caps = append(caps, pluginCap(csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE))
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

func pluginCap(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
	return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
}

// Probe answers ready only when the volume groups can be read.
func (i *Identity) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if i.prober != nil {
		if err := i.prober.Probe(ctx); err != nil {
			return nil, fmt.Errorf("%w: %w", volume.ErrFailedPrecondition, err)
		}
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}
