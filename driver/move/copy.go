package move

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	carvecsi "carve.dev/carve/driver/csi"
	"carve.dev/carve/driver/volume"
)

// copy is the Copy phase: the source resolved and recorded, S1 recorded
// and taken, the target placed on toNode as S1's restore (its ID
// recorded once the class's VG for it is chosen) and its copy followed
// until the agent reports it made.
func (r *Reconciler) copy(ctx context.Context, m *v1alpha1.VolumeMove) (time.Duration, error) {
	src, err := r.resolve(ctx, m)
	if err != nil {
		return 0, err
	}
	st := &m.Status
	if st.Phase == "" {
		st.Phase, st.FromNode, st.SourceVolumeID = v1alpha1.MoveCopy, src.id.Node, src.id.String()
		st.Message = "taking a snapshot of the volume"
		r.emit(ctx, m, corev1.EventTypeNormal, ReasonMoving, "moving claim %s from node %s to node %s: its data is copied while it is in use",
			m.Spec.Claim, src.id.Node, m.Spec.ToNode)
		return 0, nil
	}
	if st.FirstSnapshotID == "" {
		st.FirstSnapshotID = snapshotID(src.id, firstSnapshotName(m)).String()
		return 0, nil // recorded before it is taken
	}
	if err := r.Backend.CheckTransfers(ctx, src.id.Node); err != nil {
		st.Message = err.Error()
		return poll, nil
	}
	if wait, err := r.takeSnapshot(ctx, m, src.id, firstSnapshotName(m), st.FirstSnapshotID); err != nil || wait > 0 {
		return wait, err
	}
	return r.placeTarget(ctx, m, src)
}

// takeSnapshot takes (or finds) the move's snapshot name of source,
// which the status records as want; wait > 0 until it is ready (a thick
// one is a copy).
func (r *Reconciler) takeSnapshot(ctx context.Context, m *v1alpha1.VolumeMove, source volume.ID, name, want string) (time.Duration, error) {
	call, cancel := context.WithTimeout(ctx, callTime)
	defer cancel()
	snap, err := r.Backend.CreateMoveSnapshot(call, name, source, key(m))
	switch {
	case pending(err):
		m.Status.Message = fmt.Sprintf("taking snapshot %s of volume %s: %v", want, source, err)
		return poll, nil
	case err != nil:
		return 0, answer(fmt.Sprintf("snapshot %s of volume %s", want, source), err)
	case snap.ID.String() != want:
		return 0, fmt.Errorf("snapshot %s of VolumeMove %s is %s, not %s as its status says", name, key(m), snap.ID, want)
	case !snap.Ready:
		m.Status.Message = fmt.Sprintf("snapshot %s of volume %s is being copied on node %s", want, source, source.Node)
		return poll, nil
	}
	return 0, nil
}

// placeTarget asks for the target (idempotent: its name is the move's),
// records where it went and makes it owner of S1; once the agent reports
// it made, the move is ready to cut over.
func (r *Reconciler) placeTarget(ctx context.Context, m *v1alpha1.VolumeMove, src *source) (time.Duration, error) {
	call, cancel := context.WithTimeout(ctx, callTime)
	defer cancel()
	_, err := r.Volumes.CreateVolume(call, targetRequest(m, src))
	if err != nil && !pending(err) {
		return 0, answer("the new volume on node "+m.Spec.ToNode, err)
	}
	target, rerr := r.placed(ctx, m)
	if rerr != nil || target == nil {
		return poll, rerr
	}
	if err != nil {
		m.Status.Message = fmt.Sprintf("copying the volume to node %s: %v", m.Spec.ToNode, err)
		if p, ok := copiedPercent(target); ok {
			m.Status.CopiedPercent = p
		}
		return poll, nil
	}
	st := &m.Status
	st.Phase, st.CopiedPercent = v1alpha1.MoveReadyToCutOver, 100
	st.Message = "copied: stop the workload (scale it down, or evict its pod) for the cut-over"
	r.emit(ctx, m, corev1.EventTypeNormal, ReasonReadyToCutOver,
		"claim %s is copied to node %s: stop its workload; the downtime is the catch-up of what it wrote since", m.Spec.Claim, m.Spec.ToNode)
	return 0, nil
}

// placed reads the target's LogicalVolume (nil while there is none),
// records its ID and makes it owner of S1, so that the garbage collector
// removes S1 with a target that goes before the move is done.
func (r *Reconciler) placed(ctx context.Context, m *v1alpha1.VolumeMove) (*v1alpha1.LogicalVolume, error) {
	var lv v1alpha1.LogicalVolume
	err := r.API.Get(ctx, client.ObjectKey{Name: targetResource(m)}, &lv)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get the target %s of VolumeMove %s: %w", targetResource(m), key(m), err)
	}
	if m.Status.TargetVolumeID == "" {
		if err := r.Backend.OwnSnapshot(ctx, snapshotResource(firstSnapshotName(m)), &lv); err != nil {
			return nil, err
		}
		m.Status.TargetVolumeID = volume.ID{Node: lv.Spec.NodeName, VG: lv.Spec.VolumeGroup, LV: lv.Name}.String()
	}
	return &lv, nil
}

// targetRequest is the CreateVolume the provisioner would send for a
// restore of S1 on toNode: the class's parameters (the CO's own left
// out, the claim named, so that the agent's copy events reach it), the
// VolumeAttributesClass's as mutable parameters, the source's size, the
// PersistentVolume's access mode and filesystem.
func targetRequest(m *v1alpha1.VolumeMove, src *source) *csi.CreateVolumeRequest {
	params := map[string]string{}
	for k, v := range src.class.Parameters {
		if !strings.HasPrefix(k, volume.COParamPrefix) {
			params[k] = v
		}
	}
	params[volume.ParamClaimName], params[volume.ParamClaimNamespace] = m.Spec.Claim, m.Namespace
	topo := []*csi.Topology{{Segments: map[string]string{carvecsi.TopologyKey: m.Spec.ToNode}}}
	return &csi.CreateVolumeRequest{
		Name:               targetName(m),
		CapacityRange:      &csi.CapacityRange{RequiredBytes: src.lv.Status.SizeBytes},
		VolumeCapabilities: []*csi.VolumeCapability{capabilityOf(src.pv)},
		Parameters:         params,
		MutableParameters:  src.mutableParameters(),
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: m.Status.FirstSnapshotID}}},
		AccessibilityRequirements: &csi.TopologyRequirement{Requisite: topo, Preferred: topo},
	}
}

// capabilityOf is the capability pv was provisioned with.
func capabilityOf(pv *corev1.PersistentVolume) *csi.VolumeCapability {
	mode := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	for _, a := range pv.Spec.AccessModes {
		if a == corev1.ReadWriteOncePod {
			mode = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
	}
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		return c
	}
	c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: pv.Spec.CSI.FSType, MountFlags: pv.Spec.MountOptions}}
	return c
}

// pending: the backend's call ended before the agent's work did, or the
// work waits for something that may come (a node serving transfers).
// Anything else is an answer.
func pending(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	switch volume.CodeOf(err) {
	case codes.Aborted, codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

// answer is the backend's final answer err about what: a refusal when
// it says the move cannot be done (no room above all), else an error to
// retry.
func answer(what string, err error) error {
	switch volume.CodeOf(err) {
	case codes.ResourceExhausted:
		return refuse("no room: %s: %v", what, err)
	case codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound:
		return refuse("%s: %v", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
