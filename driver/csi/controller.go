package csi

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/volume"
)

// DefaultVolumeSize is carved when a request names no size.
const DefaultVolumeSize int64 = 1 << 30

// Controller is the CSI Controller service.
type Controller struct {
	csi.UnimplementedControllerServer
	csi.UnimplementedGroupControllerServer
	backend Backend
}

// NewController serves the controller calls from backend.
func NewController(b Backend) *Controller { return &Controller{backend: b} }

var controllerCaps = []csi.ControllerServiceCapability_RPC_Type{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
	csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	csi.ControllerServiceCapability_RPC_GET_VOLUME,
	csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH,
	csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH,
	csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
	csi.ControllerServiceCapability_RPC_GET_SNAPSHOT,
	csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
}

func (c *Controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	caps := controllerCaps
	if c.canModify() {
		caps = append(slices.Clip(caps), csi.ControllerServiceCapability_RPC_MODIFY_VOLUME)
	}
	out := make([]*csi.ControllerServiceCapability, 0, len(caps))
	for _, t := range caps {
		out = append(out, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: out}, nil
}

func (c *Controller) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, invalidArgument("volume name missing")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	source, err := contentSource(req.GetVolumeContentSource())
	if err != nil {
		return nil, err
	}
	mutable, err := parseMutable(req.GetMutableParameters())
	if err != nil {
		return nil, err
	}
	if !mutable.IsZero() && !c.canModify() {
		return nil, invalidArgument("mutable parameters given, and this driver cannot modify volumes")
	}
	params, err := parseParams(withMutable(req.GetParameters(), mutable), c.backend.VolumeGroups())
	if err != nil {
		return nil, err
	}
	if params.RecreateBlankWhenLost && !c.keepsRecords() {
		return nil, invalidArgument("parameter %s=true needs cluster mode: standalone mode keeps no record of a volume but its LV, so a lost one cannot be recreated",
			ParamRecreateBlankWhenLost)
	}
	if params.WriteCache != nil && !c.canModify() {
		return nil, invalidArgument("parameter %s given, and this driver cannot attach caches", ParamWriteCache)
	}
	fsType, err := chooseFsType(req.GetVolumeCapabilities(), params.FsType)
	if err != nil {
		return nil, err
	}
	mkfsOpts, err := mkfsOptions(fsType, req.GetParameters())
	if err != nil {
		return nil, err
	}
	nodes, err := chooseNodes(req.GetAccessibilityRequirements())
	if err != nil {
		return nil, err
	}
	required, limit, err := sizeRange(req.GetCapacityRange(), fsType)
	if err != nil {
		return nil, err
	}
	vg, vgs := vgOf(params, source != nil)
	if params.Encrypted {
		required = withHeader(required, limit, fsType)
	}
	if params.Encrypted && hasBlock(req.GetVolumeCapabilities()) {
		return nil, invalidArgument("parameter %s=%s: raw block volumes cannot be encrypted (a pod would get the ciphertext); use a filesystem volume",
			ParamEncryption, EncryptionLUKS2)
	}
	requester, err := volume.RequesterFrom(req.GetParameters(), volume.RequesterClaim)
	if err != nil {
		return nil, invalidArgument("%v", err)
	}
	vol, err := c.backend.CreateVolume(volume.WithRequester(ctx, requester), volume.CreateRequest{
		Name: req.GetName(), Node: first(nodes), OtherNodes: rest(nodes), VG: vg, VGs: vgs, RequiredBytes: required, LimitBytes: limit, Type: params.Type, Source: source,
		ParamsDigest: paramsDigest(req.GetParameters(), fsType), Encrypted: params.Encrypted, Limits: params.Limits,
		RecreateBlankWhenLost: params.RecreateBlankWhenLost,
	})
	if err != nil {
		return nil, err
	}
	if vol, err = c.withWriteCache(ctx, vol, params.WriteCache); err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId:           vol.ID.String(),
		CapacityBytes:      vol.SizeBytes,
		VolumeContext:      volumeContext(vol, fsType, mkfsOpts),
		AccessibleTopology: []*csi.Topology{nodeTopology(vol.ID.Node)},
		ContentSource:      csiContentSource(vol.Source),
	}}, nil
}

// vgOf is a request's VG: the one its parameters name, else for a
// volume made from a source the source's (""); or, for a class's
// several, none yet and the choice, which the backend resolves where it
// knows their space.
func vgOf(p volumeParams, fromSource bool) (string, *volume.VGChoice) {
	if one, ok := p.VGs.Single(); ok {
		if fromSource && !p.vgGiven {
			return "", nil
		}
		return one, nil
	}
	return "", &p.VGs
}

// withWriteCache gives a new volume the write cache its parameters ask
// for (ModifyVolume's step, after the LV exists: lvm2 attaches a cache to
// an LV). A retried CreateVolume finds the volume and runs it again, a
// no-op once the cache is there. A cache that cannot be had (no room on
// its PVs, PVs not in the VG) undoes the creation, so that the CO's
// placement elsewhere leaves nothing behind; a refusal that may pass
// (ABORTED, UNAVAILABLE, a deadline) leaves the volume for the retry.
func (c *Controller) withWriteCache(ctx context.Context, vol volume.Volume, wc *volume.WriteCache) (volume.Volume, error) {
	if wc == nil {
		return vol, nil
	}
	cached, err := c.backend.(Modifier).ModifyVolume(ctx, vol.ID, volume.Mutable{WriteCache: wc})
	if err == nil {
		return cached, nil
	}
	switch volume.CodeOf(err) {
	case codes.Aborted, codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return vol, err
	}
	if derr := c.backend.DeleteVolume(context.WithoutCancel(ctx), vol.ID); derr != nil {
		return vol, fmt.Errorf("%w (and undoing the creation: %s)", err, derr.Error())
	}
	return vol, err
}

// volumeContext is what NodeStage learns of a new volume: its VG, its
// filesystem, the mkfs options for it when the class has any and, for an
// encrypted one (asked, or made from an encrypted source),
// encryption=luks2.
func volumeContext(vol volume.Volume, fsType string, mkfsOpts nodefs.MkfsOptions) map[string]string {
	vc := map[string]string{ParamVolumeGroup: vol.ID.VG, ParamFsType: fsType}
	if !mkfsOpts.IsZero() {
		vc[ParamMkfsOptions] = strings.Join(mkfsOpts.Args(), " ")
	}
	if vol.Encrypted {
		vc[ParamEncryption] = EncryptionLUKS2
	}
	return vc
}

// withHeader raises required so that an encrypted volume's filesystem,
// which its LUKS2 header leaves volume.LUKSHeaderBytes less room, still
// gets room, and its mkfs's minimum, where the limit allows.
func withHeader(required, limit int64, fsType string) int64 {
	least := volume.MinEncryptedSize(fsType)
	if required < least && (limit == 0 || limit >= least) {
		return least
	}
	return required
}

// hasBlock tells whether any capability asks for a raw block volume.
func hasBlock(caps []*csi.VolumeCapability) bool {
	for _, c := range caps {
		if c.GetBlock() != nil {
			return true
		}
	}
	return false
}

// paramsDigest identifies what shapes the volume: the parameters as given
// (CO metadata excluded by ParamsDigest) and the chosen filesystem.
func paramsDigest(params map[string]string, fsType string) string {
	p := make(map[string]string, len(params)+1)
	for k, v := range params {
		p[k] = v
	}
	p[ParamFsType] = fsType
	return volume.ParamsDigest(p)
}

// contentSource reads a CreateVolume content source. An ID that Carve could
// not have made names nothing: NOT_FOUND, as CSI asks.
func contentSource(s *csi.VolumeContentSource) (*volume.ContentSource, error) {
	switch {
	case s == nil:
		return nil, nil
	case s.GetSnapshot() != nil:
		id, err := volume.ParseID(s.GetSnapshot().GetSnapshotId())
		if err != nil {
			return nil, fmt.Errorf("source snapshot: %w: %w", volume.ErrSnapshotNotFound, err)
		}
		return &volume.ContentSource{Kind: volume.SourceSnapshot, ID: id}, nil
	case s.GetVolume() != nil:
		id, err := volume.ParseID(s.GetVolume().GetVolumeId())
		if err != nil {
			return nil, fmt.Errorf("source volume: %w", err)
		}
		return &volume.ContentSource{Kind: volume.SourceVolume, ID: id}, nil
	}
	return nil, invalidArgument("volume content source of unknown type")
}

func csiContentSource(s *volume.ContentSource) *csi.VolumeContentSource {
	switch {
	case s == nil:
		return nil
	case s.Kind == volume.SourceSnapshot:
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: s.ID.String()}}}
	default:
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: s.ID.String()}}}
	}
}

// first is nodes' first, "" when there is none; rest the others.
func first(nodes []string) string {
	if len(nodes) == 0 {
		return ""
	}
	return nodes[0]
}

func rest(nodes []string) []string {
	if len(nodes) < 2 {
		return nil
	}
	return nodes[1:]
}

func nodeTopology(node string) *csi.Topology {
	return &csi.Topology{Segments: map[string]string{TopologyKey: node}}
}

// chooseFsType: the capability's fs_type wins, then the fsType parameter,
// then ext4. Block volumes carry none but keep the default in their context.
func chooseFsType(caps []*csi.VolumeCapability, param string) (string, error) {
	fs, err := capsFsType(caps)
	if err != nil || fs != "" {
		return fs, err
	}
	if param != "" {
		return param, nil
	}
	return volume.DefaultFSType, nil
}

// chooseNodes returns the nodes of the requirements' preferred, then
// requisite, segments in that order, each once (none when none is
// named): under WaitForFirstConsumer the first is the node the scheduler
// selected, and with the provisioner's --strict-topology the only one.
// A backend that cannot carve on the one it places the volume on answers
// RESOURCE_EXHAUSTED, so that the CO reschedules. A segment of Carve's
// key that cannot be a node ID (volume.ValidateNodeID) is
// INVALID_ARGUMENT: no node of Carve's has it, and in cluster mode it
// would otherwise become a resource that no agent ever takes.
func chooseNodes(req *csi.TopologyRequirement) ([]string, error) {
	var nodes []string
	for _, list := range [][]*csi.Topology{req.GetPreferred(), req.GetRequisite()} {
		for _, t := range list {
			n := t.GetSegments()[TopologyKey]
			if n == "" || slices.Contains(nodes, n) {
				continue
			}
			if err := volume.ValidateNodeID(n); err != nil {
				return nil, fmt.Errorf("accessibility requirements: %w", err)
			}
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// sizeRange applies CSI's capacity range rules: no size asked means the
// default (within the limit), and xfs and btrfs volumes are carved big
// enough for their mkfs when the limit allows.
func sizeRange(r *csi.CapacityRange, fsType string) (required, limit int64, err error) {
	required, limit = r.GetRequiredBytes(), r.GetLimitBytes()
	if required < 0 || limit < 0 {
		return 0, 0, invalidArgument("capacity range [%d, %d]: negative size", required, limit)
	}
	if limit > 0 && required > limit {
		return 0, 0, invalidArgument("capacity range: required %d above limit %d", required, limit)
	}
	if required == 0 {
		required = DefaultVolumeSize
		if limit > 0 && limit < required {
			required = limit
		}
	}
	if least := volume.MinSize(fsType); required < least && (limit == 0 || limit >= least) {
		required = least
	}
	return required, limit, nil
}

func (c *Controller) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, invalidArgument("volume id missing")
	}
	id, err := volume.ParseID(req.GetVolumeId())
	if err != nil {
		// Not an ID Carve could have made: nothing of ours to delete.
		klog.InfoS("DeleteVolume of a foreign volume id: nothing to do", "volumeId", req.GetVolumeId())
		return &csi.DeleteVolumeResponse{}, nil
	}
	if err := c.backend.DeleteVolume(ctx, id); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeResponse{}, nil
}
