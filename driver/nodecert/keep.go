package nodecert

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/transfer"
)

// Retry bounds of Keep after a failure: the controller may not be up yet,
// or the API server unreachable for a while.
const (
	retryFirst = 5 * time.Second
	retryMost  = 5 * time.Minute
)

// Keep holds the node's credentials in ring until ctx ends: it gets them
// (Credentials), sets them, and gets them again when they are due for
// renewal. A failure is logged and tried again, after 5 s, then twice as
// long each time up to 5 minutes; the credentials in ring meanwhile stay
// as they were (valid for a third of their life after the renewal was
// due). ready, if not nil, is called once, when ring first holds
// credentials.
func (r *Requester) Keep(ctx context.Context, ring *transfer.Keyring, ready func()) {
	wait := retryFirst
	for {
		creds, renew, err := r.Credentials(ctx)
		next := time.Until(renew)
		if err != nil {
			klog.ErrorS(err, "Transfer credentials: will try again", "node", r.Node, "in", wait)
			next, wait = wait, min(2*wait, retryMost)
		} else {
			ring.Set(creds)
			wait = retryFirst
			klog.InfoS("Transfer credentials in use", "node", r.Node, "renewAt", renew.UTC().Format(time.RFC3339))
			if ready != nil {
				ready()
				ready = nil
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(next, time.Second)):
		}
	}
}
