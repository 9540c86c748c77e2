package backend

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// report reads what the agent last said of a resource: the generation its
// status is about, and its failure (nil: none).
type report func() (observed int64, failure *v1alpha1.OperationError)

func volumeReport(lv *v1alpha1.LogicalVolume) report {
	return func() (int64, *v1alpha1.OperationError) { return lv.Status.ObservedGeneration, lv.Status.Error }
}

func snapshotReport(s *v1alpha1.LogicalVolumeSnapshot) report {
	return func() (int64, *v1alpha1.OperationError) { return s.Status.ObservedGeneration, s.Status.Error }
}

func groupReport(g *v1alpha1.LogicalVolumeGroupSnapshot) report {
	return func() (int64, *v1alpha1.OperationError) { return g.Status.ObservedGeneration, g.Status.Error }
}

// untilGone, as await's done, waits for the resource to be deleted.
var untilGone func() bool

// resync is how often a wait woken by Changes reads its resource anyway: a
// safety net only, since no change is missed (see Changes).
const resync = 10 * time.Second

// await is the one wait of the backend for the node agent. It reads obj
// (of kind, by its name) until done() holds of it, or, with done nil
// (untilGone), until it no longer exists. It reads the cache, then sleeps
// until Changes says obj changed (without Changes, for pollInterval).
//
// What it reads may be older than the caller's last write (a cache lags):
// the status counts only once it is about generation minGen (the one the
// caller's write made) or later, and about the object's current generation.
// A failure the agent reports about that generation ends the wait with
// the failure's CSI code; an older one is stale and is waited out. A
// deletion raises the generation of a resource with finalizers, so a
// failure to delete is told from an earlier failure to create. When ctx
// ends first the agent is still at work: errPending.
func (b *Backend) await(ctx context.Context, kind string, obj client.Object, minGen int64, rep report, done func() bool) error {
	key := types.NamespacedName{Name: obj.GetName()}
	for {
		var changed <-chan struct{}
		if b.Changes != nil {
			changed = b.Changes.next(kind, key.Name)
		}
		err := b.Cache.Get(ctx, key, obj)
		switch {
		case apierrors.IsNotFound(err) && done == nil:
			// A cache that never saw the resource says NotFound too:
			// the API has the last word on "gone".
			if gone, err := b.goneFromAPI(ctx, key, obj); !gone {
				if err != nil && ctx.Err() != nil {
					return errPending // as above
				}
				if err != nil {
					return err
				}
				if err := sleep(ctx, changed); err != nil {
					return err
				}
				continue
			}
			return nil
		case apierrors.IsNotFound(err):
			// A resource just created may not be in the cache yet.
			if err := sleep(ctx, changed); err != nil {
				return err
			}
			continue
		case err != nil && ctx.Err() != nil:
			// The call's deadline ended in the read instead of the
			// sleep: the same wait cut short, the agent still at work.
			return errPending
		case err != nil:
			return fmt.Errorf("get %s: %w", key.Name, err)
		}
		observed, failure := rep()
		current := observed == obj.GetGeneration() && observed >= minGen
		if done == nil && obj.GetDeletionTimestamp().IsZero() {
			current = false // what it says is about the time before the deletion
		}
		if current && failure != nil {
			return agentError(failure)
		}
		if current && done != nil && done() {
			return nil
		}
		if err := sleep(ctx, changed); err != nil {
			return err
		}
	}
}

// goneFromAPI asks the API, uncached, whether the resource is gone.
func (b *Backend) goneFromAPI(ctx context.Context, key types.NamespacedName, obj client.Object) (bool, error) {
	err := b.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get %s: %w", key.Name, err)
	}
	return false, nil
}

// sleep waits for changed (or, with none, pollInterval), at most resync.
func sleep(ctx context.Context, changed <-chan struct{}) error {
	wait := pollInterval
	if changed != nil {
		wait = resync
	}
	select {
	case <-ctx.Done():
		return errPending
	case <-changed:
	case <-time.After(wait):
	}
	return nil
}
