package backend

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

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
// picked node, not the snapshot's). A clone of a volume on another node
// stays NOT_FOUND: its data changes while it is read; a snapshot of it
// can be restored anywhere.

// isRemote tells whether req's source lives on another node than the
// one the volume goes to.
func isRemote(req volume.CreateRequest) bool {
	return req.Source != nil && req.Source.ID.Node != req.Node
}

// settleRemoteSource fixes req for a restore from another node's
// snapshot, or says why it cannot be done.
func (b *Backend) settleRemoteSource(ctx context.Context, req *volume.CreateRequest) error {
	src := req.Source
	if src.Kind != volume.SourceSnapshot {
		return fmt.Errorf("volume %s is on node %s, the new volume's node is %s: a volume is cloned only on its own node; take a snapshot of it and restore that: %w",
			src.ID, src.ID.Node, req.Node, volume.ErrVolumeNotFound)
	}
	snap, err := lookupSnapshot(ctx, b.Cache, src.ID)
	if err != nil {
		return err
	}
	switch {
	case !snap.DeletionTimestamp.IsZero():
		return fmt.Errorf("snapshot %s is being deleted: %w", src.ID, volume.ErrSnapshotNotFound)
	case !snap.Status.ReadyToUse:
		return fmt.Errorf("snapshot %s is not ready yet: %w", src.ID, volume.ErrOperationPending)
	}
	if err := b.checkTransfers(ctx, src.ID.Node); err != nil {
		return err
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

// checkTransfers: the snapshot's node serves transfers (its agent
// published where), else the restore waits for it (UNAVAILABLE, which
// the provisioner retries).
func (b *Backend) checkTransfers(ctx context.Context, node string) error {
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
// snapshot's volume is, as on the snapshot's node (lvmvol's
// settleEncryption). The volume's resource tells; without it, which
// the restore would be cannot be known, and it is refused.
func (b *Backend) settleRemoteEncryption(ctx context.Context, req *volume.CreateRequest, snap *v1alpha1.LogicalVolumeSnapshot) error {
	srcVol, err := volume.ParseID(snap.Spec.SourceVolumeID)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", req.Source.ID, err)
	}
	var lv v1alpha1.LogicalVolume
	err = b.Cache.Get(ctx, types.NamespacedName{Name: srcVol.LV}, &lv)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: snapshot %s is on node %s, and its volume %s is gone, so whether it holds encrypted data is not known: restore it on node %s",
			volume.ErrFailedPrecondition, req.Source.ID, req.Source.ID.Node, srcVol, req.Source.ID.Node)
	}
	if err != nil {
		return fmt.Errorf("volume of snapshot %s: %w", req.Source.ID, err)
	}
	encrypted := lv.Spec.Encrypted || lv.Status.Encrypted
	if req.Encrypted && !encrypted {
		return fmt.Errorf("%w: encryption asked, but snapshot %s is of a volume that is not encrypted: its copy would hold its plaintext",
			volume.ErrSourceMismatch, req.Source.ID)
	}
	req.Encrypted = encrypted
	return nil
}
