// Package backend is the controller's side of cluster mode: the driver's
// Backend carried out through LogicalVolume resources. The controller
// cannot reach a node's volume group, so each call writes the desired state
// into the volume's resource and waits until the node agent reports it
// done (or failed, with the CSI code of the failure).
//
// Idempotency: a resource is named after the volume's LV name, itself
// derived from the CSI name (volume.LVName), so a retried call finds what
// the first one made. The resource carries the agent's finalizer from its
// creation, so it is gone only when its LV is.
package backend

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/nodeloss"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// errPending: the agent has not finished within the call's deadline; the
// CO retries (ABORTED: the operation is still in progress).
var errPending = status.Error(codes.Aborted, "the node agent has not finished yet")

// Backend implements csi.Backend (the CSI layer's view of volume work) over
// resources.
type Backend struct {
	// Client writes, and reads what a write depends on (the latest
	// resource, never a cached copy).
	Client client.Client
	// Cache serves the reads that may lag a little: the waits for the
	// agent, GetVolume, the lists and GetCapacity, so that neither the
	// waits nor csi-provisioner's polls cost the API server anything.
	// Required: carve controller gives its manager's informer cache (a
	// test may give Client, a cache that never lags).
	Cache client.Reader
	// Changes, fed by watches of the resources (WatchWith), wakes the
	// waits. Required: carve controller gives the one its cache's
	// watches feed (a test whose Cache is Client gives one a watch of its
	// own feeds: the waits never poll).
	Changes *Changes
	// VGs are the volume groups StorageClasses may name; the first is the
	// default.
	VGs []string
}

// VolumeGroups are the VGs StorageClasses may name.
func (b *Backend) VolumeGroups() []string { return b.VGs }

// CreateVolume writes the volume's resource on the requested node and
// waits for the agent to carve it.
func (b *Backend) CreateVolume(ctx context.Context, req volume.CreateRequest) (volume.Volume, error) {
	if req.Node == "" {
		return volume.Volume{}, status.Error(codes.InvalidArgument,
			"cluster mode needs a node in the accessibility requirements: use a WaitForFirstConsumer StorageClass")
	}
	name := volume.LVName(req.Name) // the resource's name (resourceFor)
	var lv v1alpha1.LogicalVolume
	err := b.Client.Get(ctx, types.NamespacedName{Name: name}, &lv)
	if err != nil && !apierrors.IsNotFound(err) {
		return volume.Volume{}, fmt.Errorf("get %s: %w", name, err)
	}
	b.placeAmong(ctx, &req, &lv)
	remote, clonedFrom := isRemote(req), ""
	if remote {
		if clonedFrom, err = b.settleRemoteSource(ctx, &req, &lv); err != nil {
			return volume.Volume{}, err
		}
	}
	if req.VGs != nil {
		if req.VG, err = b.pickVG(ctx, req, lv.Spec); err != nil {
			return volume.Volume{}, err
		}
	}
	if !remote {
		if err := req.SettleSourceVG(); err != nil {
			return volume.Volume{}, err
		}
	}
	want := resourceFor(req)
	if clonedFrom != "" {
		want.Annotations = map[string]string{v1alpha1.AnnotationClonedFrom: clonedFrom}
	}
	switch {
	case lv.Name == "":
		want.Spec.Requester = b.requesterOf(ctx)
		if err := b.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return volume.Volume{}, fmt.Errorf("create %s: %w", want.Name, err)
		}
	case lv.Spec.NodeName != req.Node && lv.Status.VolumeID == "":
		// An earlier attempt on another node never carved anything (the
		// CO rescheduled after RESOURCE_EXHAUSTED): start over here.
		if err := b.Client.Delete(ctx, &lv); err != nil && !apierrors.IsNotFound(err) {
			return volume.Volume{}, fmt.Errorf("drop attempt on %s: %w", lv.Spec.NodeName, err)
		}
		return volume.Volume{}, status.Errorf(codes.Aborted, "moving volume %q from node %s to %s", req.Name, lv.Spec.NodeName, req.Node)
	case !sameVolume(lv.Spec, want.Spec):
		return volume.Volume{}, fmt.Errorf("volume %q exists with other arguments: %w", req.Name, volume.ErrNameConflict)
	}
	if clonedFrom != "" && lv.Status.VolumeID == "" {
		if err := b.ownCloneSnapshot(ctx, want); err != nil {
			return volume.Volume{}, err
		}
	}
	vol, err := b.waitVolume(ctx, want.Name, max(lv.Generation, want.Generation),
		func(lv *v1alpha1.LogicalVolume) bool { return lv.Status.VolumeID != "" })
	if status.Code(err) == codes.ResourceExhausted {
		b.dropUncarved(ctx, want.Name)
	}
	if err == nil && clonedFrom != "" {
		err = b.dropCloneSnapshot(ctx, req.Name)
	}
	return vol, err
}

// KeepsRecords: the LogicalVolume is a record of each volume beside its
// LV (csi.RecordKeeper).
func (b *Backend) KeepsRecords() {}

// dropUncarved deletes a LogicalVolume whose LV was never carved, after the
// node refused it for want of space. The CO retries CreateVolume (on this
// node or, rescheduled, another); a fresh resource is reconciled at once,
// while a failed one would wait out the agent's growing retry backoff,
// and space freed meanwhile would go unnoticed for minutes. Nothing is lost:
// no LV exists, and the finalizer still lets the agent check that.
func (b *Backend) dropUncarved(ctx context.Context, name string) {
	var lv v1alpha1.LogicalVolume
	if err := b.Client.Get(ctx, types.NamespacedName{Name: name}, &lv); err != nil || lv.Status.VolumeID != "" {
		return
	}
	if err := b.Client.Delete(ctx, &lv); err != nil && !apierrors.IsNotFound(err) {
		klog.ErrorS(err, "Dropping a refused volume's resource failed; the agent keeps retrying it", "logicalVolume", name)
	}
}

// resourceFor is the LogicalVolume of a create request.
func resourceFor(req volume.CreateRequest) *v1alpha1.LogicalVolume {
	lv := &v1alpha1.LogicalVolume{
		ObjectMeta: metav1.ObjectMeta{Name: volume.LVName(req.Name), Finalizers: []string{v1alpha1.VolumeFinalizer}},
		Spec: v1alpha1.LogicalVolumeSpec{
			Name: req.Name, NodeName: req.Node, VolumeGroup: req.VG,
			RequiredBytes: req.RequiredBytes, LimitBytes: req.LimitBytes, ParamsDigest: req.ParamsDigest, Encrypted: req.Encrypted,
			Type: v1alpha1.VolumeType{ThinPool: req.Type.ThinPool, Stripes: req.Type.Stripes,
				StripeSize: int64(req.Type.StripeSize), Mirrors: req.Type.Mirrors, RAID: req.Type.RAID, Integrity: req.Type.Integrity},
			IOLimits: v1alpha1.LimitsOf(req.Limits), RecreateBlankWhenLost: req.RecreateBlankWhenLost,
		},
	}
	if req.Source != nil {
		lv.Spec.Source = &v1alpha1.ContentSource{Kind: req.Source.Kind, ID: req.Source.ID.String()}
	}
	return lv
}

// sameVolume: a retry asks for what the resource already says (its size
// may have grown since by an expansion).
func sameVolume(have, want v1alpha1.LogicalVolumeSpec) bool {
	return have.NodeName == want.NodeName && have.VolumeGroup == want.VolumeGroup &&
		have.ParamsDigest == want.ParamsDigest && have.Type == want.Type && have.Encrypted == want.Encrypted &&
		(have.Source == nil) == (want.Source == nil) && (have.Source == nil || *have.Source == *want.Source) &&
		have.RequiredBytes >= want.RequiredBytes
}

// waitVolume waits for the agent to bring the LogicalVolume name, at
// generation minGen or later, to done (see awaitDone) and returns the
// volume it reports.
func (b *Backend) waitVolume(ctx context.Context, name string, minGen int64, done func(*v1alpha1.LogicalVolume) bool) (volume.Volume, error) {
	lv := &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := b.awaitDone(ctx, KindVolume, lv, minGen, volumeReport(lv), func() bool { return done(lv) }); err != nil {
		return volume.Volume{}, err
	}
	return volumeOf(lv)
}

// agentError turns the agent's report back into the CSI error it was.
func agentError(e *v1alpha1.OperationError) error {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == e.Code {
			return status.Error(c, e.Message)
		}
	}
	return status.Error(codes.Internal, e.Message)
}

func volumeOf(lv *v1alpha1.LogicalVolume) (volume.Volume, error) {
	id, err := volume.ParseID(lv.Status.VolumeID)
	if err != nil {
		return volume.Volume{}, fmt.Errorf("status of %s: %w", lv.Name, err)
	}
	v := volume.Volume{ID: id, Name: lv.Spec.Name, SizeBytes: lv.Status.SizeBytes,
		Published: lv.Status.Published, DevicePath: lv.Status.DevicePath, Encrypted: lv.Status.Encrypted}
	if s := lv.Spec.Source; s != nil {
		if sid, err := volume.ParseID(s.ID); err == nil {
			v.Source = &volume.ContentSource{Kind: s.Kind, ID: sid}
		}
	}
	for _, h := range lv.Status.Health {
		v.Health = append(v.Health, volume.Problem{Kind: volume.ParseProblemKind(h.Kind), Reason: h.Reason, Message: h.Message})
	}
	return v, nil
}

// lookup finds the resource of a volume ID; a resource of another node is
// not this volume.
func (b *Backend) lookup(ctx context.Context, id volume.ID) (*v1alpha1.LogicalVolume, error) {
	return lookupIn(ctx, b.Client, id)
}

// lookupIn is lookup in r: the API, or the cache for reads that may lag.
func lookupIn(ctx context.Context, r client.Reader, id volume.ID) (*v1alpha1.LogicalVolume, error) {
	var lv v1alpha1.LogicalVolume
	err := r.Get(ctx, types.NamespacedName{Name: id.LV}, &lv)
	if apierrors.IsNotFound(err) || (err == nil && (lv.Spec.NodeName != id.Node || lv.Spec.VolumeGroup != id.VG)) {
		return nil, fmt.Errorf("volume %s: %w", id, volume.ErrVolumeNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", id.LV, err)
	}
	return &lv, nil
}

// GetVolume reports a volume the agent has carved (from the cache).
func (b *Backend) GetVolume(ctx context.Context, _ lvm.Reads, id volume.ID) (volume.Volume, error) {
	lv, err := lookupIn(ctx, b.Cache, id)
	if err != nil {
		return volume.Volume{}, err
	}
	if lv.Status.VolumeID == "" || !lv.DeletionTimestamp.IsZero() {
		return volume.Volume{}, fmt.Errorf("volume %s is being created or deleted: %w", id, volume.ErrVolumeNotFound)
	}
	return volumeOf(lv)
}

// ListVolumes lists the carved volumes in ID order.
func (b *Backend) ListVolumes(ctx context.Context, _ lvm.Reads) ([]volume.Volume, error) {
	var list v1alpha1.LogicalVolumeList
	if err := b.Cache.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	var out []volume.Volume
	for i := range list.Items {
		lv := &list.Items[i]
		if lv.Status.VolumeID == "" || !lv.DeletionTimestamp.IsZero() {
			continue
		}
		if v, err := volumeOf(lv); err == nil {
			out = append(out, v)
		}
	}
	sortVolumes(out)
	return out, nil
}

// DeleteVolume deletes the resource and waits until the agent has removed
// the LV and let the resource go (or, on a node declared lost, until the
// controller's nodeloss.Reconciler has let it go, the LV left in place).
func (b *Backend) DeleteVolume(ctx context.Context, id volume.ID) error {
	lv, err := b.lookup(ctx, id)
	if errors.Is(err, volume.ErrVolumeNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if lv.Status.Published && lv.Spec.PublishedNode != "" {
		return fmt.Errorf("volume %s is still published: %w", id, volume.ErrInUse)
	}
	if lv.Status.Published {
		// Unpublished in the spec, not yet by the agent: only a lost
		// node's volume may go now (nodeloss releases it); any other
		// waits for its agent to deactivate the LV first.
		lost, err := nodeloss.Lost(ctx, b.Cache, id.Node)
		if err != nil {
			return err
		}
		if !lost {
			return fmt.Errorf("volume %s is still published: %w", id, volume.ErrInUse)
		}
	}
	return b.deleteAndAwait(ctx, KindVolume, lv, volumeReport(lv))
}

// deleteAndAwait deletes obj (of kind) and waits until the agent has
// removed what it holds and let it go: gone from the API.
func (b *Backend) deleteAndAwait(ctx context.Context, kind string, obj client.Object, rep report) error {
	if err := b.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", obj.GetName(), err)
	}
	return b.awaitGone(ctx, kind, obj, rep)
}
