package csi

import (
	"context"
	"fmt"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

func (c *Controller) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, invalidArgument("volume capabilities missing")
	}
	if _, err := c.getVolume(ctx, req.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

// getVolume is the queries' read of one volume: LVM may answer it from a
// recent report (lvm.Cached; the CO and health monitors poll it).
func (c *Controller) getVolume(ctx context.Context, volumeID string) (volume.Volume, error) {
	return c.volumeByID(ctx, lvm.Cached, volumeID)
}

// volumeByID reads the volume behind a CSI volume ID as r says.
func (c *Controller) volumeByID(ctx context.Context, r lvm.Reads, volumeID string) (volume.Volume, error) {
	id, err := volume.ParseID(volumeID)
	if err != nil {
		return volume.Volume{}, err
	}
	return c.backend.GetVolume(ctx, r, id)
}

func (c *Controller) ControllerGetVolume(ctx context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	vol, err := c.getVolume(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	e := listEntry(vol)
	return &csi.ControllerGetVolumeResponse{Volume: e.Volume, Status: &csi.ControllerGetVolumeResponse_VolumeStatus{
		PublishedNodeIds: e.Status.PublishedNodeIds,
	}}, nil
}

// ListVolumes pages through the volumes in ID order. The token is the index
// of the next entry; volumes created or deleted between pages may shift it,
// which CSI allows.
func (c *Controller) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, invalidArgument("max_entries %d is negative", req.GetMaxEntries())
	}
	vols, err := c.backend.ListVolumes(ctx, lvm.Cached) // a query: see getVolume
	if err != nil {
		return nil, err
	}
	start, err := pageStart(req.GetStartingToken(), len(vols))
	if err != nil {
		return nil, err
	}
	end := pageEnd(start, int(req.GetMaxEntries()), len(vols))
	resp := &csi.ListVolumesResponse{NextToken: nextToken(end, len(vols))}
	for _, v := range vols[start:end] {
		resp.Entries = append(resp.Entries, listEntry(v))
	}
	return resp, nil
}

// pageEnd is where a page of at most max entries (0: all) from start ends.
func pageEnd(start, max, n int) int {
	if max > 0 && start+max < n {
		return start + max
	}
	return n
}

// nextToken is the token of the page after end, "" when end is the last.
func nextToken(end, n int) string {
	if end < n {
		return strconv.Itoa(end)
	}
	return ""
}

// pageStart decodes a ListVolumes token; a token CSI did not get from us is
// ABORTED, as the spec asks. Only the tokens nextToken hands out are
// taken: "+1" or "01" are none of them.
func pageStart(token string, n int) (int, error) {
	if token == "" {
		return 0, nil
	}
	i, err := strconv.Atoi(token)
	if err != nil || i < 0 || i > n || strconv.Itoa(i) != token {
		return 0, errInvalidToken(token)
	}
	return i, nil
}

func listEntry(v volume.Volume) *csi.ListVolumesResponse_Entry {
	st := &csi.ListVolumesResponse_VolumeStatus{}
	if v.Published {
		st.PublishedNodeIds = []string{v.ID.Node}
	}
	return &csi.ListVolumesResponse_Entry{
		Volume: &csi.Volume{
			VolumeId:           v.ID.String(),
			CapacityBytes:      v.SizeBytes,
			AccessibleTopology: []*csi.Topology{nodeTopology(v.ID.Node)},
		},
		Status: st,
	}
}

// GetCapacity answers for one node (the topology segment) and one parameter
// set; with no topology, for the node the backend serves.
func (c *Controller) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	params, err := parseParams(req.GetParameters(), c.backend.VolumeGroups())
	if err != nil {
		return nil, err
	}
	if len(req.GetVolumeCapabilities()) > 0 && checkCapabilities(req.GetVolumeCapabilities()) != nil {
		return &csi.GetCapacityResponse{}, nil // none of it can serve these capabilities
	}
	node := req.GetAccessibleTopology().GetSegments()[TopologyKey]
	if node != "" {
		if err := volume.ValidateNodeID(node); err != nil {
			return nil, fmt.Errorf("accessible topology: %w", err)
		}
	}
	capy, err := c.backend.Capacity(ctx, node, params.VGs, params.Type)
	if err != nil {
		return nil, err
	}
	return &csi.GetCapacityResponse{
		AvailableCapacity: capy.AvailableBytes,
		MaximumVolumeSize: wrapperspb.Int64(capy.MaximumVolumeBytes),
	}, nil
}
