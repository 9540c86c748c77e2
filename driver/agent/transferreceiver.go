package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/transfer"
	"carve.dev/carve/driver/volume"
)

// DefaultTransferGiveUp is how long a receiver keeps trying to reach a
// snapshot's node before anything of it is in (TransferReceiver.GiveUp).
const DefaultTransferGiveUp = 3 * time.Minute

// TransferReceiver receives other nodes' snapshots for volumes restored
// on this node (lvmvol.Remote): it dials the address the snapshot's node
// publishes in its NodeStorage.
//
// A snapshot's node that cannot be reached at all (no address published,
// connections refused or timing out) is tried again at each of the
// volume's retries for GiveUp; then the receive fails with
// transfer.ErrGaveUp (RESOURCE_EXHAUSTED), the new LV is removed
// (lvmvol), the controller drops the volume's resource, and the CO
// places the claim again, possibly on the snapshot's own node. Only a
// transfer with nothing in yet gives up: one that got part of the bytes
// had a route, and waits for it to come back with its progress kept.
//
// The clock of each volume is this process's memory: a restarted agent
// starts it again, which only makes the wait longer. It is dropped when
// the volume's receive gets through, fails otherwise, or gives up (the
// next try is a new volume, or the same one placed here again).
type TransferReceiver struct {
	Client *transfer.Client
	// Reader reads other nodes' NodeStorage from the API server (the
	// agent's cache holds its own node's only).
	Reader client.Reader
	// GiveUp is how long an unreachable source is tried; 0:
	// DefaultTransferGiveUp.
	GiveUp time.Duration
	// now is the clock (tests); nil: time.Now.
	now func() time.Time

	mu sync.Mutex
	// since is when each volume's receive (by LV name) first found its
	// source's node unreachable.
	since map[string]time.Time
}

// Receive implements lvmvol.Remote. A catch-up (base set) never gives
// up: its volume holds the base's bytes already, a move's first copy.
func (r *TransferReceiver) Receive(ctx context.Context, source, base volume.ID, forLV string, t transfer.Target, size, from int64,
	checkpoint transfer.Checkpoint) error {
	err := r.receive(ctx, source, base, forLV, t, size, from, checkpoint)
	if !errors.Is(err, transfer.ErrUnreachable) || from > 0 || base != (volume.ID{}) || ctx.Err() != nil {
		r.forget(forLV)
		return err
	}
	waited := r.unreachableFor(forLV)
	if waited < r.giveUp() {
		return fmt.Errorf("%w (tried for %s of %s)", err, waited.Round(time.Second), r.giveUp())
	}
	r.forget(forLV)
	klog.InfoS("Giving up on a snapshot's node", "lv", forLV, "source", source, "waited", waited.Round(time.Second), "err", err)
	// The cause as text only: it may wrap ErrOperationPending, whose
	// code (ABORTED) would come first (volume.CodeOf).
	return fmt.Errorf("%w %s after %s: %s", transfer.ErrGaveUp, source.Node, waited.Round(time.Second), err.Error())
}

// receive dials the address source's node publishes and receives.
func (r *TransferReceiver) receive(ctx context.Context, source, base volume.ID, forLV string, t transfer.Target, size, from int64,
	checkpoint transfer.Checkpoint) error {
	var ns v1alpha1.NodeStorage
	if err := r.Reader.Get(ctx, client.ObjectKey{Name: source.Node}, &ns); err != nil {
		return fmt.Errorf("the transfer address of node %s: %w", source.Node, err)
	}
	addr := ns.Status.TransferAddress
	if addr == "" {
		// As unreachable as a refused connection, and as likely to
		// change (its carve node is starting, or has transfers off).
		return fmt.Errorf("%w: node %s, where snapshot %s is, serves no transfers yet (its carve node has no certificate, or --transfer-address is off): %w",
			volume.ErrOperationPending, source.Node, source, transfer.ErrUnreachable)
	}
	req := transfer.Request{Source: source.String(), For: forLV, From: from}
	if base != (volume.ID{}) {
		req.Base = base.String()
	}
	_, err := r.Client.Receive(ctx, addr, source.Node, req, t, size, checkpoint)
	return err
}

func (r *TransferReceiver) giveUp() time.Duration {
	if r.GiveUp > 0 {
		return r.GiveUp
	}
	return DefaultTransferGiveUp
}

// unreachableFor records a failure to reach forLV's source and says how
// long it has lasted.
func (r *TransferReceiver) unreachableFor(forLV string) time.Duration {
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since == nil {
		r.since = map[string]time.Time{}
	}
	first, ok := r.since[forLV]
	if !ok {
		first = now()
		r.since[forLV] = first
	}
	return now().Sub(first)
}

func (r *TransferReceiver) forget(forLV string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.since, forLV)
}
