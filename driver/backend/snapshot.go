package backend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// CreateSnapshot writes the snapshot's resource on its source's node and
// waits until the agent has taken it (ready or, for a thick volume, still
// copying: the CO asks again until ready_to_use).
func (b *Backend) CreateSnapshot(ctx context.Context, name string, source volume.ID) (volume.Snapshot, error) {
	return b.createSnapshot(ctx, name, source, nil)
}

// createSnapshot is CreateSnapshot, the new resource annotated with
// annotations (nil for a CO's snapshot).
func (b *Backend) createSnapshot(ctx context.Context, name string, source volume.ID, annotations map[string]string) (volume.Snapshot, error) {
	if _, err := b.lookup(ctx, source); err != nil {
		return volume.Snapshot{}, err
	}
	want := &v1alpha1.LogicalVolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: volume.SnapshotLVName(name), Finalizers: []string{v1alpha1.SnapshotFinalizer},
			Annotations: annotations},
		Spec: v1alpha1.LogicalVolumeSnapshotSpec{Name: name, NodeName: source.Node, SourceVolumeID: source.String()},
	}
	var have v1alpha1.LogicalVolumeSnapshot
	err := b.Client.Get(ctx, types.NamespacedName{Name: want.Name}, &have)
	switch {
	case apierrors.IsNotFound(err):
		want.Spec.Requester = b.requesterOf(ctx)
		if err := b.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return volume.Snapshot{}, fmt.Errorf("create %s: %w", want.Name, err)
		}
	case err != nil:
		return volume.Snapshot{}, fmt.Errorf("get %s: %w", want.Name, err)
	case !sameSnapshot(have.Spec, want.Spec):
		return volume.Snapshot{}, fmt.Errorf("snapshot %q exists with another source: %w", name, volume.ErrNameConflict)
	}
	minGen := max(have.Generation, want.Generation)
	have.Name = want.Name
	if err := b.awaitDone(ctx, KindSnapshot, &have, minGen, snapshotReport(&have), func() bool { return have.Status.SnapshotID != "" }); err != nil {
		return volume.Snapshot{}, err
	}
	return snapshotOf(&have)
}

// hidden: the snapshot is the controller's own, taken for a clone on
// another node or a move, and listed to no CO.
func hidden(s *v1alpha1.LogicalVolumeSnapshot) bool {
	return s.Annotations[v1alpha1.AnnotationCloneFor] != "" || s.Annotations[v1alpha1.AnnotationMoveFor] != ""
}

// CreateMoveSnapshot is CreateSnapshot for a move's own snapshot (S1,
// S2: driver/move), annotated with the move (namespace/name) and listed
// to no CO.
func (b *Backend) CreateMoveSnapshot(ctx context.Context, name string, source volume.ID, move string) (volume.Snapshot, error) {
	return b.createSnapshot(ctx, name, source, map[string]string{v1alpha1.AnnotationMoveFor: move})
}

// sameSnapshot: a retry asks for the snapshot the resource says (whatever
// requester the first call named).
func sameSnapshot(have, want v1alpha1.LogicalVolumeSnapshotSpec) bool {
	return have.Name == want.Name && have.NodeName == want.NodeName && have.SourceVolumeID == want.SourceVolumeID
}

func snapshotOf(s *v1alpha1.LogicalVolumeSnapshot) (volume.Snapshot, error) {
	id, err := volume.ParseID(s.Status.SnapshotID)
	if err != nil {
		return volume.Snapshot{}, fmt.Errorf("status of %s: %w", s.Name, err)
	}
	src, err := volume.ParseID(s.Spec.SourceVolumeID)
	if err != nil {
		return volume.Snapshot{}, fmt.Errorf("spec of %s: %w", s.Name, err)
	}
	out := volume.Snapshot{ID: id, Name: s.Spec.Name, Source: src, SizeBytes: s.Status.SizeBytes, Ready: s.Status.ReadyToUse}
	if s.Status.CreationTime != nil {
		out.CreatedAt = s.Status.CreationTime.Time
	}
	return out, nil
}

// lookupSnapshot finds the resource of a snapshot ID in r (the API, or
// the cache for reads that may lag), also while it is being deleted.
func lookupSnapshot(ctx context.Context, r client.Reader, id volume.ID) (*v1alpha1.LogicalVolumeSnapshot, error) {
	var s v1alpha1.LogicalVolumeSnapshot
	if err := lookupTaken(ctx, r, id, &s, func() string { return s.Status.SnapshotID }); err != nil {
		return nil, err
	}
	return &s, nil
}

// lookupTaken reads the resource of a snapshot or group ID from r into
// obj: the one named after the ID's last part, whose status (takenID)
// names the ID; one not taken yet is not found either.
func lookupTaken(ctx context.Context, r client.Reader, id volume.ID, obj client.Object, takenID func() string) error {
	err := r.Get(ctx, types.NamespacedName{Name: id.LV}, obj)
	if apierrors.IsNotFound(err) || (err == nil && takenID() != id.String()) {
		return fmt.Errorf("snapshot %s: %w", id, volume.ErrSnapshotNotFound)
	}
	if err != nil {
		return fmt.Errorf("get %s: %w", id.LV, err)
	}
	return nil
}

// GetSnapshot reports a snapshot, or a group's member; one being deleted
// is gone already.
func (b *Backend) GetSnapshot(ctx context.Context, _ lvm.Reads, id volume.ID) (volume.Snapshot, error) {
	s, err := lookupSnapshot(ctx, b.Cache, id)
	if errors.Is(err, volume.ErrSnapshotNotFound) {
		g, member, err := memberOf(ctx, b.Cache, id)
		if err == nil && !g.DeletionTimestamp.IsZero() {
			return volume.Snapshot{}, fmt.Errorf("snapshot %s: its group is being deleted: %w", id, volume.ErrSnapshotNotFound)
		}
		return member, err
	}
	if err != nil {
		return volume.Snapshot{}, err
	}
	if !s.DeletionTimestamp.IsZero() {
		return volume.Snapshot{}, fmt.Errorf("snapshot %s is being deleted: %w", id, volume.ErrSnapshotNotFound)
	}
	return snapshotOf(s)
}

// ListSnapshots lists the taken snapshots, groups' members included, in
// ID order.
func (b *Backend) ListSnapshots(ctx context.Context, _ lvm.Reads) ([]volume.Snapshot, error) {
	var list v1alpha1.LogicalVolumeSnapshotList
	if err := b.Cache.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var groups v1alpha1.LogicalVolumeGroupSnapshotList
	if err := b.Cache.List(ctx, &groups); err != nil {
		return nil, fmt.Errorf("list group snapshots: %w", err)
	}
	out := groupMembers(&groups)
	for i := range list.Items {
		s := &list.Items[i]
		if s.Status.SnapshotID == "" || !s.DeletionTimestamp.IsZero() || hidden(s) {
			continue // not taken, going, or a cross-node clone's or a move's own
		}
		if snap, err := snapshotOf(s); err == nil {
			out = append(out, snap)
		}
	}
	slices.SortFunc(out, func(a, b volume.Snapshot) int { return strings.Compare(a.ID.String(), b.ID.String()) })
	return out, nil
}

// DeleteSnapshot deletes the resource and waits until the agent has
// removed the LV, or reports why it cannot; a retry of a deletion under
// way waits for it again, so that success means the LV is gone. A
// snapshot that does not exist is deleted already. A group's member is
// deleted with its group only (INVALID_ARGUMENT, as in standalone mode:
// driver/lvmvol/group.go says why).
func (b *Backend) DeleteSnapshot(ctx context.Context, id volume.ID) error {
	s, err := lookupSnapshot(ctx, b.Client, id)
	if errors.Is(err, volume.ErrSnapshotNotFound) {
		return b.refuseMember(ctx, id)
	}
	if err != nil {
		return err
	}
	return b.deleteAndAwait(ctx, KindSnapshot, s, snapshotReport(s))
}

// refuseMember: a snapshot with no resource of its own is either gone
// (deleted already) or a group's member, which is not deleted alone.
func (b *Backend) refuseMember(ctx context.Context, id volume.ID) error {
	g, _, err := memberOf(ctx, b.Client, id)
	if errors.Is(err, volume.ErrSnapshotNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: snapshot %s is a member of group snapshot %s: delete the group",
		volume.ErrInvalidArgument, id, g.Status.GroupSnapshotID)
}
