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
	TransferSource(ctx context.Context, id volume.ID) (transfer.Source, error)
}

// TransferAuthorizer decides, for this node's transfer server, whether a
// peer node may read one of this node's snapshots: only to fill a
// LogicalVolume the controller placed on that peer with that snapshot as
// its source, while the volume is still being made. Everything else is
// refused alike, a LogicalVolume that does not exist included, so that
// a peer learns nothing of what it may not read.
type TransferAuthorizer struct {
	// Reader reads LogicalVolumes from the API server: the volume is
	// another node's, which this agent's cache does not hold.
	Reader  client.Reader
	Node    string
	Sources TransferSources
}

// Authorize implements transfer.Authorizer.
func (a *TransferAuthorizer) Authorize(ctx context.Context, peer string, req transfer.Request) (transfer.Source, error) {
	id, refusal, err := a.check(ctx, peer, req)
	if err != nil {
		return nil, fmt.Errorf("reading volume %s: %w", req.For, err)
	}
	if refusal != "" {
		klog.InfoS("Transfer refused", "peer", peer, "source", req.Source, "for", req.For, "reason", refusal)
		return nil, fmt.Errorf("%w: %s", transfer.ErrRefused, refusal)
	}
	return a.Sources.TransferSource(ctx, id)
}

// check returns the snapshot req may read, or why not (refusal), or the
// error of reading the cluster (a retry may do).
func (a *TransferAuthorizer) check(ctx context.Context, peer string, req transfer.Request) (id volume.ID, refusal string, err error) {
	id, err = volume.ParseID(req.Source)
	if err != nil || id.Node != a.Node {
		return volume.ID{}, fmt.Sprintf("%s is not a snapshot of node %s", req.Source, a.Node), nil
	}
	var lv v1alpha1.LogicalVolume
	err = a.Reader.Get(ctx, client.ObjectKey{Name: req.For}, &lv)
	if err != nil && !apierrors.IsNotFound(err) {
		return volume.ID{}, "", err
	}
	src := lv.Spec.Source
	switch {
	case err != nil || lv.Spec.NodeName != peer || src == nil || src.Kind != "snapshot" || src.ID != req.Source:
		return volume.ID{}, fmt.Sprintf("no volume %s made from %s on node %s", req.For, req.Source, peer), nil
	case lv.DeletionTimestamp != nil || lv.Status.Phase == v1alpha1.PhaseReady:
		return volume.ID{}, fmt.Sprintf("volume %s on node %s is no longer being made", req.For, peer), nil
	}
	return id, "", nil
}
