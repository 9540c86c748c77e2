package csi

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// Volume health (CSI 1.13's VolumeHealth, which replaced VolumeCondition).

var volumeHealthKinds = map[volume.ProblemKind]csi.VolumeHealthErrorType{
	volume.Degraded:     csi.VolumeHealthErrorType_DEGRADED,
	volume.Inaccessible: csi.VolumeHealthErrorType_INACCESSIBLE,
	volume.DataLoss:     csi.VolumeHealthErrorType_DATA_LOSS,
}

func volumeHealth(id string, problems []volume.Problem) *csi.VolumeHealth {
	h := &csi.VolumeHealth{VolumeId: id}
	for _, p := range problems {
		h.HealthStatuses = append(h.HealthStatuses, &csi.VolumeHealth_VolumeHealthEntry{
			Status: volumeHealthKinds[p.Kind], Reason: p.Reason, Message: p.Message,
		})
	}
	return h
}

func (c *Controller) ControllerGetVolumeHealth(ctx context.Context, req *csi.ControllerGetVolumeHealthRequest) (*csi.ControllerGetVolumeHealthResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	// Health reads lvm2 afresh, unlike the queries (lvm.Cached):
	// a failed disk must show now, not when a report expires. Nothing
	// polls the health RPCs by default, so that costs no idle command.
	vol, err := c.volumeByID(ctx, lvm.Fresh, req.GetVolumeId())
	if unreadable, ok := unreadableHealth(err); ok {
		return &csi.ControllerGetVolumeHealthResponse{VolumeHealth: volumeHealth(req.GetVolumeId(), unreadable)}, nil
	}
	if err != nil {
		return nil, err
	}
	return &csi.ControllerGetVolumeHealthResponse{VolumeHealth: volumeHealth(req.GetVolumeId(), vol.Health)}, nil
}

// ControllerListVolumeHealth lists the volumes with adverse conditions only,
// paged like ListVolumes. It reads lvm2 afresh (see
// ControllerGetVolumeHealth).
func (c *Controller) ControllerListVolumeHealth(ctx context.Context, req *csi.ControllerListVolumeHealthRequest) (*csi.ControllerListVolumeHealthResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, invalidArgument("max_entries %d is negative", req.GetMaxEntries())
	}
	vols, err := c.backend.ListVolumes(ctx, lvm.Fresh)
	if err != nil {
		return nil, err
	}
	var sick []*csi.VolumeHealth
	for _, v := range vols {
		if len(v.Health) > 0 {
			sick = append(sick, volumeHealth(v.ID.String(), v.Health))
		}
	}
	start, err := pageStart(req.GetStartingToken(), len(sick))
	if err != nil {
		return nil, err
	}
	end := pageEnd(start, int(req.GetMaxEntries()), len(sick))
	return &csi.ControllerListVolumeHealthResponse{Entries: sick[start:end], NextToken: nextToken(end, len(sick))}, nil
}

// NodeGetVolumeHealth adds what the node sees to LVM's view: an LV that is
// not active, or a publish/staging path that is no longer a mount of this
// volume, makes the volume inaccessible here. The paths, when given, must
// be the CO's (checkPath).
func (n *Node) NodeGetVolumeHealth(ctx context.Context, req *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	id, err := n.localID(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	paths := slices.DeleteFunc([]string{req.GetStagingTargetPath(), req.GetVolumePublishPath()}, func(p string) bool { return p == "" })
	for _, p := range paths {
		if err := n.checkPath("path", p); err != nil {
			return nil, err
		}
	}
	vol, err := n.volumes.GetVolume(ctx, lvm.Fresh, id)
	if unreadable, ok := unreadableHealth(err); ok {
		return &csi.NodeGetVolumeHealthResponse{VolumeHealth: volumeHealth(req.GetVolumeId(), unreadable)}, nil
	}
	if err != nil {
		return nil, err
	}
	problems := vol.Health
	if !vol.Published {
		problems = append(problems, volume.Problem{Kind: volume.Inaccessible, Reason: "NotActive",
			Message: "logical volume is not active on this node"})
	}
	for _, p := range paths {
		if !showsVolume(vol, p) {
			problems = append(problems, volume.Problem{Kind: volume.Inaccessible, Reason: "NotMounted",
				Message: fmt.Sprintf("%s is not a mount of this volume", p)})
		}
	}
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: volumeHealth(req.GetVolumeId(), problems)}, nil
}

// showsVolume: path is a mount of the volume's filesystem or its device
// node, by the device number lvm reports for its LV, or of the device
// above it that holds its filesystem (dataDevice).
func showsVolume(vol volume.Volume, path string) bool {
	if vol.KernelMajor < 0 || vol.KernelMinor < 0 {
		return false
	}
	rdev := unix.Mkdev(uint32(vol.KernelMajor), uint32(vol.KernelMinor))
	dev, err := dataDevice(volumeDevice{Volume: vol, Rdev: rdev, LVRdev: rdev})
	if err != nil {
		return false
	}
	fsOK, _ := nodefs.FilesystemOf(path, dev.Rdev)
	nodeOK, _ := nodefs.DeviceNodeOf(path, dev.Rdev)
	return fsOK || nodeOK
}

// unreadableHealth: a volume whose VG cannot be read is a health answer
// (inaccessible), not an error of the health call.
func unreadableHealth(err error) ([]volume.Problem, bool) {
	if !errors.Is(err, volume.ErrVGUnreadable) {
		return nil, false
	}
	return []volume.Problem{{Kind: volume.Inaccessible, Reason: "VolumeGroupUnreadable", Message: err.Error()}}, true
}

// StorageHealther reports the health of the node's volume groups.
type StorageHealther interface {
	StorageHealth(ctx context.Context) []volume.Problem
}

var storageHealthKinds = map[volume.ProblemKind]csi.StorageHealthErrorType{
	volume.Degraded:     csi.StorageHealthErrorType_STORAGE_DEGRADED,
	volume.Inaccessible: csi.StorageHealthErrorType_STORAGE_UNREACHABLE,
	volume.DataLoss:     csi.StorageHealthErrorType_STORAGE_DEGRADED,
}

func (n *Node) NodeGetStorageHealth(ctx context.Context, _ *csi.NodeGetStorageHealthRequest) (*csi.NodeGetStorageHealthResponse, error) {
	resp := &csi.NodeGetStorageHealthResponse{}
	for _, p := range n.volumes.StorageHealth(ctx) {
		resp.BackendHealth = append(resp.BackendHealth, &csi.NodeGetStorageHealthResponse_StorageBackendHealth{
			Status: storageHealthKinds[p.Kind], Reason: p.Reason, Message: p.Message,
		})
	}
	return resp, nil
}
