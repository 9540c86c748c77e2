package agent

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/transfer"
	"carve.dev/carve/driver/volume"
)

// TransferSources opens this node's snapshots for transfers
// (lvmvol.Manager).
type TransferSources interface {
	TransferSource(ctx context.Context, id, base volume.ID) (transfer.Source, error)
}

// TransferAuthorizer decides, for this node's transfer server, whether a
// peer node may read one of this node's snapshots: only to fill a
// LogicalVolume the controller placed on that peer with that snapshot as
// its source, while the volume is still being made; or, for a catch-up
// (a request naming a base), only for a LogicalVolume of that peer made
// from the base whose spec.catchUpTo names the snapshot (catchUpCheck).
// Everything else is refused alike, a LogicalVolume that does not exist
// included, so that a peer learns nothing of what it may not read.
type TransferAuthorizer struct {
	// Reader reads LogicalVolumes from the API server: the volume is
	// another node's, which this agent's cache does not hold.
	Reader  client.Reader
	Node    string
	Sources TransferSources
}

// Authorize implements transfer.Authorizer.
func (a *TransferAuthorizer) Authorize(ctx context.Context, peer string, req transfer.Request) (transfer.Source, error) {
	check := a.check
	if req.Base != "" {
		check = a.catchUpCheck
	}
	id, refusal, err := check(ctx, peer, req)
	if err != nil {
		return nil, fmt.Errorf("reading volume %s: %w", req.For, err)
	}
	if refusal != "" {
		klog.InfoS("Transfer refused", "peer", peer, "source", req.Source, "base", req.Base, "for", req.For, "reason", refusal)
		return nil, fmt.Errorf("%w: %s", transfer.ErrRefused, refusal)
	}
	var base volume.ID
	if req.Base != "" {
		base, _ = volume.ParseID(req.Base) // checked by catchUpCheck
	}
	return a.Sources.TransferSource(ctx, id, base)
}

// catchUpCheck is check for a catch-up: it allows reading snapshot S2
// (req.Source) against S1 (req.Base) only to fill a LogicalVolume of the
// peer that was made from S1 (spec.source), that the controller asked to
// catch up to S2 (spec.catchUpTo), and that has not yet (status), is
// being deleted by no one and is published nowhere.
//
// Why this is the narrowest safe extension of check: the peer receives
// S2's bytes only where the controller, which alone writes spec, decided
// so for a volume it placed there, as it decides a restore; S1 and S2 are
// snapshots of one volume (this node's lvmvol refuses a base of another
// volume, or a newer one), so a peer that holds S1's data learns only
// that volume's later state, which a restore from S2 would have given it
// whole; and a volume published nowhere is no workload's yet, so nothing
// reads the bytes while they change. The request's base must be the
// volume's source, or the keep runs would leave the bytes of another
// snapshot in place.
func (a *TransferAuthorizer) catchUpCheck(ctx context.Context, peer string, req transfer.Request) (id volume.ID, refusal string, err error) {
	id, err = volume.ParseID(req.Source)
	base, berr := volume.ParseID(req.Base)
	if err != nil || berr != nil || id.Node != a.Node || base.Node != a.Node {
		return volume.ID{}, fmt.Sprintf("%s and %s are not snapshots of node %s", req.Source, req.Base, a.Node), nil
	}
	lv, found, err := a.volume(ctx, req.For)
	if err != nil {
		return volume.ID{}, "", err
	}
	src := lv.Spec.Source
	switch {
	case !found || lv.Spec.NodeName != peer || src == nil || src.Kind != "snapshot" || src.ID != req.Base ||
		lv.Spec.CatchUpTo != req.Source:
		return volume.ID{}, fmt.Sprintf("no volume %s made from %s to catch up to %s on node %s", req.For, req.Base, req.Source, peer), nil
	case lv.DeletionTimestamp != nil || lv.Status.Phase != v1alpha1.PhaseReady || lv.Status.CaughtUpTo == req.Source:
		return volume.ID{}, fmt.Sprintf("volume %s on node %s is not waiting for a catch-up", req.For, peer), nil
	case lv.Spec.PublishedNode != "":
		return volume.ID{}, fmt.Sprintf("volume %s is published to %s: it cannot catch up", req.For, lv.Spec.PublishedNode), nil
	}
	return id, "", nil
}

// check returns the snapshot req may read, or why not (refusal), or the
// error of reading the cluster (a retry may do).
func (a *TransferAuthorizer) check(ctx context.Context, peer string, req transfer.Request) (id volume.ID, refusal string, err error) {
	id, err = volume.ParseID(req.Source)
	if err != nil || id.Node != a.Node {
		return volume.ID{}, fmt.Sprintf("%s is not a snapshot of node %s", req.Source, a.Node), nil
	}
	lv, found, err := a.volume(ctx, req.For)
	if err != nil {
		return volume.ID{}, "", err
	}
	src := lv.Spec.Source
	switch {
	case !found || lv.Spec.NodeName != peer || src == nil || src.Kind != "snapshot" || src.ID != req.Source:
		return volume.ID{}, fmt.Sprintf("no volume %s made from %s on node %s", req.For, req.Source, peer), nil
	case lv.DeletionTimestamp != nil || lv.Status.Phase == v1alpha1.PhaseReady:
		return volume.ID{}, fmt.Sprintf("volume %s on node %s is no longer being made", req.For, peer), nil
	}
	return id, "", nil
}

// volume reads the LogicalVolume a request names; found is false when
// there is none, which is refused as any other mismatch is.
func (a *TransferAuthorizer) volume(ctx context.Context, name string) (lv v1alpha1.LogicalVolume, found bool, err error) {
	err = a.Reader.Get(ctx, client.ObjectKey{Name: name}, &lv)
	if apierrors.IsNotFound(err) {
		return lv, false, nil
	}
	return lv, err == nil, err
}
