package backend

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// Group snapshots in cluster mode: one LogicalVolumeGroupSnapshot per
// group, named after the group (volume.GroupSnapshotName, the last part of
// its ID), on its sources' node; the agent takes the instant there
// (driver/lvmvol/group.go) and reports the members in the status. The
// members have no resource of their own: the snapshot calls find them in
// their group's status (memberOf).

// CreateGroupSnapshot writes the group's resource and waits until the
// agent has taken the instant (members ready or, thick ones, still
// copying: the CO asks again until ready_to_use).
func (b *Backend) CreateGroupSnapshot(ctx context.Context, name string, sources []volume.ID) (volume.GroupSnapshot, error) {
	if err := b.checkGroupSources(ctx, sources); err != nil {
		return volume.GroupSnapshot{}, err
	}
	want := &v1alpha1.LogicalVolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: volume.GroupSnapshotName(name), Finalizers: []string{v1alpha1.GroupSnapshotFinalizer}},
		Spec:       v1alpha1.LogicalVolumeGroupSnapshotSpec{Name: name, NodeName: sources[0].Node},
	}
	for _, s := range sources {
		want.Spec.SourceVolumeIDs = append(want.Spec.SourceVolumeIDs, s.String())
	}
	var have v1alpha1.LogicalVolumeGroupSnapshot
	err := b.Client.Get(ctx, types.NamespacedName{Name: want.Name}, &have)
	switch {
	case apierrors.IsNotFound(err):
		if err := b.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return volume.GroupSnapshot{}, fmt.Errorf("create %s: %w", want.Name, err)
		}
	case err != nil:
		return volume.GroupSnapshot{}, fmt.Errorf("get %s: %w", want.Name, err)
	case have.Spec.Name != name || have.Spec.NodeName != want.Spec.NodeName || !slices.Equal(have.Spec.SourceVolumeIDs, want.Spec.SourceVolumeIDs):
		return volume.GroupSnapshot{}, fmt.Errorf("group snapshot %q exists with other sources: %w", name, volume.ErrNameConflict)
	}
	minGen := max(have.Generation, want.Generation)
	have.Name = want.Name
	if err := b.awaitDone(ctx, KindGroupSnapshot, &have, minGen, groupReport(&have), func() bool { return have.Status.GroupSnapshotID != "" }); err != nil {
		return volume.GroupSnapshot{}, err
	}
	return groupOf(&have)
}

// checkGroupSources: every source is a volume, all on one node (the agent
// of that node checks the rest: one VG, none named twice). Checked here
// too, so that a group across nodes fails at once rather than wait for an
// agent that cannot take it.
func (b *Backend) checkGroupSources(ctx context.Context, sources []volume.ID) error {
	for _, s := range sources {
		if _, err := b.lookup(ctx, s); err != nil {
			return err
		}
		if s.Node != sources[0].Node {
			return fmt.Errorf("%w: volume %s lives on node %s, %s on %s: a group snapshot's volumes must share a node",
				volume.ErrFailedPrecondition, s, s.Node, sources[0], sources[0].Node)
		}
	}
	return nil
}

// groupOf is the group snapshot a resource's status reports.
func groupOf(g *v1alpha1.LogicalVolumeGroupSnapshot) (volume.GroupSnapshot, error) {
	id, err := volume.ParseID(g.Status.GroupSnapshotID)
	if err != nil {
		return volume.GroupSnapshot{}, fmt.Errorf("status of %s: %w", g.Name, err)
	}
	out := volume.GroupSnapshot{ID: id}
	for i := range g.Status.Members {
		s, err := memberSnapshot(id, &g.Status.Members[i])
		if err != nil {
			return volume.GroupSnapshot{}, fmt.Errorf("status of %s: %w", g.Name, err)
		}
		out.Add(s)
	}
	// The agent's word on readiness: it knows how many members the group
	// must have.
	out.Ready = g.Status.ReadyToUse
	return out, nil
}

func memberSnapshot(group volume.ID, m *v1alpha1.GroupMember) (volume.Snapshot, error) {
	id, err := volume.ParseID(m.SnapshotID)
	if err != nil {
		return volume.Snapshot{}, fmt.Errorf("member: %w", err)
	}
	src, err := volume.ParseID(m.SourceVolumeID)
	if err != nil {
		return volume.Snapshot{}, fmt.Errorf("member %s: %w", id, err)
	}
	s := volume.Snapshot{ID: id, Source: src, SizeBytes: m.SizeBytes, Ready: m.ReadyToUse, Group: group}
	if m.CreationTime != nil {
		s.CreatedAt = m.CreationTime.Time
	}
	return s, nil
}

// lookupGroup finds the resource of a group snapshot ID in r, also while
// it is being deleted.
func lookupGroup(ctx context.Context, r client.Reader, id volume.ID) (*v1alpha1.LogicalVolumeGroupSnapshot, error) {
	var g v1alpha1.LogicalVolumeGroupSnapshot
	if err := lookupTaken(ctx, r, id, &g, func() string { return g.Status.GroupSnapshotID }); err != nil {
		return nil, err
	}
	return &g, nil
}

// GetGroupSnapshot reports a group snapshot; one being deleted is gone
// already.
func (b *Backend) GetGroupSnapshot(ctx context.Context, _ lvm.Reads, id volume.ID) (volume.GroupSnapshot, error) {
	g, err := lookupGroup(ctx, b.Cache, id)
	if err != nil {
		return volume.GroupSnapshot{}, err
	}
	if !g.DeletionTimestamp.IsZero() {
		return volume.GroupSnapshot{}, fmt.Errorf("group snapshot %s is being deleted: %w", id, volume.ErrSnapshotNotFound)
	}
	return groupOf(g)
}

// DeleteGroupSnapshot deletes the resource and waits until the agent has
// removed every LV of the group (as DeleteSnapshot does for one).
func (b *Backend) DeleteGroupSnapshot(ctx context.Context, id volume.ID) error {
	g, err := lookupGroup(ctx, b.Client, id)
	if errors.Is(err, volume.ErrSnapshotNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return b.deleteAndAwait(ctx, KindGroupSnapshot, g, groupReport(g))
}

// memberOf finds the group snapshot (in r) that has snapshot id as a
// member, with the member; ErrSnapshotNotFound when none has. Groups are
// few, and r is the controller's cache for every caller but a delete.
func memberOf(ctx context.Context, r client.Reader, id volume.ID) (*v1alpha1.LogicalVolumeGroupSnapshot, volume.Snapshot, error) {
	var list v1alpha1.LogicalVolumeGroupSnapshotList
	if err := r.List(ctx, &list); err != nil {
		return nil, volume.Snapshot{}, fmt.Errorf("list group snapshots: %w", err)
	}
	for i := range list.Items {
		g := &list.Items[i]
		for j := range g.Status.Members {
			if g.Status.Members[j].SnapshotID != id.String() {
				continue
			}
			group, err := volume.ParseID(g.Status.GroupSnapshotID)
			if err != nil {
				return nil, volume.Snapshot{}, fmt.Errorf("status of %s: %w", g.Name, err)
			}
			s, err := memberSnapshot(group, &g.Status.Members[j])
			return g, s, err
		}
	}
	return nil, volume.Snapshot{}, fmt.Errorf("snapshot %s: %w", id, volume.ErrSnapshotNotFound)
}

// groupMembers lists the members of the groups in list that are taken and
// not being deleted.
func groupMembers(list *v1alpha1.LogicalVolumeGroupSnapshotList) []volume.Snapshot {
	var out []volume.Snapshot
	for i := range list.Items {
		g := &list.Items[i]
		if g.Status.GroupSnapshotID == "" || !g.DeletionTimestamp.IsZero() {
			continue
		}
		if grp, err := groupOf(g); err == nil {
			out = append(out, grp.Snapshots...)
		}
	}
	return out
}
