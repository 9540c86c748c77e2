package backend

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// A restore placed on another node than its snapshot's.
//
// Under WaitForFirstConsumer the scheduler picks the claim's node; when
// that is not the snapshot's, the LogicalVolume still goes to the picked
// node, with the snapshot as its source, and that node's agent receives
// the snapshot's bytes from the snapshot's node (driver/lvmvol/remote.go,
// driver/transfer). What the agent cannot know, the controller settles
// here from the snapshot's resources: the size (at least the
// snapshot's), the encryption (the source volume's: the bytes are its
// LUKS2 header and ciphertext) and the VG (one of the class's on the
// picked node, not the snapshot's).
//
// A clone placed on another node than its source volume goes the same
// way, through a snapshot of the source that the controller takes first
// (the source's data changes while it is read; a snapshot holds still):
// its resource is annotated as the clone's own (AnnotationCloneFor), so
// that no CO lists it, and owned by the clone's LogicalVolume, so that
// the garbage collector removes it with a clone given up half way. The
// controller deletes it once the clone's copy is in, before CreateVolume
// answers: the CO retries CreateVolume until it has an answer, so a
// controller that stops in between deletes it at the retry.

// isRemote tells whether req's source lives on another node than the
// one the volume goes to.
func isRemote(req volume.CreateRequest) bool {
	return req.Source != nil && req.Source.ID.Node != req.Node
}

// settleRemoteSource fixes req for a restore from another node's
// snapshot, or a clone of another node's volume, or says why it cannot
// be done. have is the volume's resource if a call made it already. For
// a clone, it returns the volume cloned, and req's source is now the
// snapshot it goes through.
func (b *Backend) settleRemoteSource(ctx context.Context, req *volume.CreateRequest, have *v1alpha1.LogicalVolume) (clonedFrom string, err error) {
	if have.Status.VolumeID != "" {
		return settledBefore(req, have)
	}
	if req.Source.Kind == volume.SourceVolume {
		clonedFrom = req.Source.ID.String()
		if err := b.snapshotForClone(ctx, req, have); err != nil {
			return "", err
		}
	}
	return clonedFrom, b.settleRemoteSnapshot(ctx, req, clonedFrom != "")
}

// settledBefore: the volume was made by an earlier call whose answer was
// lost. What that call settled stands (its snapshot may be gone since);
// it must have had the same source.
func settledBefore(req *volume.CreateRequest, have *v1alpha1.LogicalVolume) (clonedFrom string, err error) {
	asked, src := req.Source.ID.String(), have.Spec.Source
	made := ""
	switch {
	case src == nil:
	case req.Source.Kind == volume.SourceVolume:
		made = have.Annotations[v1alpha1.AnnotationClonedFrom]
		clonedFrom = made
	case src.Kind == req.Source.Kind:
		made = src.ID
	}
	if made != asked {
		return "", fmt.Errorf("volume %q exists with another source than %s %s: %w", req.Name, req.Source.Kind, asked, volume.ErrNameConflict)
	}
	id, err := volume.ParseID(src.ID)
	if err != nil {
		return "", fmt.Errorf("source of %s: %w", have.Name, err)
	}
	req.Source = &volume.ContentSource{Kind: src.Kind, ID: id}
	req.RequiredBytes, req.Encrypted = max(req.RequiredBytes, have.Spec.RequiredBytes), have.Spec.Encrypted
	if req.VG == "" && req.VGs == nil {
		req.VG = have.Spec.VolumeGroup
	}
	return clonedFrom, nil
}

// settleRemoteSnapshot fixes req for a restore of another node's
// snapshot, or says why it cannot be done now; forClone: the snapshot is
// the one a clone goes through.
func (b *Backend) settleRemoteSnapshot(ctx context.Context, req *volume.CreateRequest, forClone bool) error {
	src := req.Source
	snap, err := lookupSnapshot(ctx, b.Cache, src.ID)
	if err != nil {
		return err
	}
	switch {
	case !snap.DeletionTimestamp.IsZero() && forClone:
		// An earlier attempt's (given up on another node): a new one is
		// taken once it is gone.
		return fmt.Errorf("the snapshot of an earlier attempt at this clone is being removed: %w", volume.ErrOperationPending)
	case !snap.DeletionTimestamp.IsZero():
		return fmt.Errorf("snapshot %s is being deleted: %w", src.ID, volume.ErrSnapshotNotFound)
	case !snap.Status.ReadyToUse && forClone:
		return fmt.Errorf("copying volume %s into a snapshot on node %s, to send it to node %s from there: %w",
			snap.Spec.SourceVolumeID, src.ID.Node, req.Node, volume.ErrOperationPending)
	case !snap.Status.ReadyToUse:
		return fmt.Errorf("snapshot %s is not ready yet: %w", src.ID, volume.ErrOperationPending)
	}
	if !forClone { // a clone checked before taking its snapshot
		if err := b.CheckTransfers(ctx, src.ID.Node); err != nil {
			return err
		}
	}
	if size := snap.Status.SizeBytes; req.RequiredBytes < size {
		if req.LimitBytes > 0 && req.LimitBytes < size {
			return fmt.Errorf("snapshot %s is %s, above the limit %s: %w", src.ID, lvm.FormatSize(uint64(size)),
				lvm.FormatSize(uint64(req.LimitBytes)), volume.ErrOutOfRange)
		}
		req.RequiredBytes = size
	}
	if err := b.settleRemoteEncryption(ctx, req, snap); err != nil {
		return err
	}
	if req.VG == "" && req.VGs == nil && len(b.VGs) > 0 {
		req.VG = b.VGs[0]
	}
	return nil
}

// CheckTransfers: the snapshot's node serves transfers (its agent
// published where), else the restore waits for it (UNAVAILABLE, which
// the provisioner retries).
func (b *Backend) CheckTransfers(ctx context.Context, node string) error {
	var ns v1alpha1.NodeStorage
	err := b.Cache.Get(ctx, types.NamespacedName{Name: node}, &ns)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("NodeStorage of %s: %w", node, err)
	}
	if ns.Status.TransferAddress == "" {
		return status.Errorf(codes.Unavailable,
			"node %s, where the snapshot is, serves no transfers to other nodes (its carve node is not running, has no transfer certificate yet, or runs with --transfer-address off)",
			node)
	}
	return nil
}

// settleRemoteEncryption: the new volume is encrypted exactly when the
// snapshot is, as on the snapshot's node (lvmvol's settleEncryption).
// The snapshot's status tells (its agent read the LV's tag); a status
// from an agent older than that field does not, and the snapshot's
// volume's resource tells instead (snapshotEncrypted).
func (b *Backend) settleRemoteEncryption(ctx context.Context, req *volume.CreateRequest, snap *v1alpha1.LogicalVolumeSnapshot) error {
	encrypted, err := b.snapshotEncrypted(ctx, req.Source.ID, snap)
	if err != nil {
		return err
	}
	if req.Encrypted && !encrypted {
		return fmt.Errorf("%w: encryption asked, but snapshot %s is of a volume that is not encrypted: its copy would hold its plaintext",
			volume.ErrSourceMismatch, req.Source.ID)
	}
	req.Encrypted = encrypted
	return nil
}

// snapshotEncrypted tells whether snap holds encrypted data: its status,
// else its volume's resource; with neither (an old status, the volume
// gone) it cannot be known, and the restore is refused.
func (b *Backend) snapshotEncrypted(ctx context.Context, id volume.ID, snap *v1alpha1.LogicalVolumeSnapshot) (bool, error) {
	if e := snap.Status.Encrypted; e != nil {
		return *e, nil
	}
	srcVol, err := volume.ParseID(snap.Spec.SourceVolumeID)
	if err != nil {
		return false, fmt.Errorf("snapshot %s: %w", id, err)
	}
	var lv v1alpha1.LogicalVolume
	err = b.Cache.Get(ctx, types.NamespacedName{Name: srcVol.LV}, &lv)
	if apierrors.IsNotFound(err) {
		return false, fmt.Errorf("%w: snapshot %s is on node %s, its volume %s is gone, and its node's agent has not said whether it holds encrypted data: restore it on node %s, or once that agent runs this version",
			volume.ErrFailedPrecondition, id, id.Node, srcVol, id.Node)
	}
	if err != nil {
		return false, fmt.Errorf("volume of snapshot %s: %w", id, err)
	}
	return lv.Spec.Encrypted || lv.Status.Encrypted, nil
}

// cloneSnapshotName is the CSI name of the snapshot a clone named
// volumeName goes through when placed on another node than its source:
// one per clone, so that a retry finds the snapshot the first call took.
func cloneSnapshotName(volumeName string) string { return "carve-clone-source:" + volumeName }

// cloneSnapshotResource names that snapshot's LogicalVolumeSnapshot.
func cloneSnapshotResource(volumeName string) string {
	return volume.SnapshotLVName(cloneSnapshotName(volumeName))
}

// snapshotForClone takes (or finds) the snapshot of the source volume
// that a clone on another node goes through, and makes it req's source.
// Transfers are checked first, so that a clone that cannot travel takes
// no snapshot.
func (b *Backend) snapshotForClone(ctx context.Context, req *volume.CreateRequest, have *v1alpha1.LogicalVolume) error {
	asked := req.Source.ID
	if have.Name != "" && have.Annotations[v1alpha1.AnnotationClonedFrom] != asked.String() {
		return fmt.Errorf("volume %q exists with another source than volume %s: %w", req.Name, asked, volume.ErrNameConflict)
	}
	if err := b.CheckTransfers(ctx, asked.Node); err != nil {
		return err
	}
	snap, err := b.createSnapshot(ctx, cloneSnapshotName(req.Name), asked,
		map[string]string{v1alpha1.AnnotationCloneFor: volume.LVName(req.Name)})
	if err != nil {
		return fmt.Errorf("snapshot of volume %s for its clone on node %s: %w", asked, req.Node, err)
	}
	req.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: snap.ID}
	return nil
}

// ownCloneSnapshot makes the clone's LogicalVolume owner of the snapshot
// it goes through: if the clone's resource goes before the copy is in
// (the claim deleted meanwhile), the garbage collector removes the
// snapshot too. Idempotent.
func (b *Backend) ownCloneSnapshot(ctx context.Context, clone *v1alpha1.LogicalVolume) error {
	if clone.UID == "" {
		if err := b.Client.Get(ctx, client.ObjectKeyFromObject(clone), clone); err != nil {
			return fmt.Errorf("get %s: %w", clone.Name, err)
		}
	}
	return b.OwnSnapshot(ctx, cloneSnapshotResource(clone.Spec.Name), clone)
}

// OwnSnapshot makes owner (read, its UID set) an owner of the
// LogicalVolumeSnapshot named snapshot, so that the garbage collector
// removes the snapshot with it; a snapshot gone already is fine.
// Idempotent.
func (b *Backend) OwnSnapshot(ctx context.Context, snapshot string, owner *v1alpha1.LogicalVolume) error {
	var snap v1alpha1.LogicalVolumeSnapshot
	if err := b.Client.Get(ctx, types.NamespacedName{Name: snapshot}, &snap); err != nil {
		return client.IgnoreNotFound(err)
	}
	for _, o := range snap.OwnerReferences {
		if o.UID == owner.UID {
			return nil
		}
	}
	gvk := v1alpha1.GroupVersion.WithKind("LogicalVolume")
	snap.OwnerReferences = append(snap.OwnerReferences, metav1.OwnerReference{
		APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: owner.Name, UID: owner.UID})
	if err := b.Client.Update(ctx, &snap); err != nil {
		return fmt.Errorf("make %s owner of %s: %w", owner.Name, snap.Name, err)
	}
	return nil
}

// dropCloneSnapshot deletes the snapshot a clone went through, its copy
// being in. The agent of its node removes the LV (the finalizer); a
// snapshot deleted already is fine.
func (b *Backend) dropCloneSnapshot(ctx context.Context, volumeName string) error {
	snap := &v1alpha1.LogicalVolumeSnapshot{ObjectMeta: metav1.ObjectMeta{Name: cloneSnapshotResource(volumeName)}}
	err := b.Client.Delete(ctx, snap)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete %s, the snapshot clone %q went through: %w", snap.Name, volumeName, err)
	}
	klog.InfoS("Deleted the snapshot a clone on another node went through, its copy being in", "volume", volumeName, "logicalVolumeSnapshot", snap.Name)
	return nil
}
