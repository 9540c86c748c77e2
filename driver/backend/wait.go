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

// untilGone, as await's done, waits for the resource to be deleted.
var untilGone func() bool

// await is the one wait of the backend for the node agent. It reads obj
// (by its name) again until done() holds of it, or, with done nil
// (untilGone), until it no longer exists. A failure the agent reports
// about the resource's current generation ends the wait with that
// failure's CSI code; an older one is stale (the agent has not seen the
// latest change yet) and is waited out. When ctx ends first the agent is
// still at work: errPending.
//
// A deletion raises the generation of a resource with finalizers, so a
// failure to delete is told from an earlier failure to create.
func (b *Backend) await(ctx context.Context, obj client.Object, rep report, done func() bool) error {
	key := types.NamespacedName{Name: obj.GetName()}
	for {
		err := b.Client.Get(ctx, key, obj)
		switch {
		case apierrors.IsNotFound(err) && done == nil:
			return nil
		case err != nil:
			return fmt.Errorf("get %s: %w", key.Name, err)
		}
		observed, failure := rep()
		current := observed == obj.GetGeneration()
		if current && failure != nil {
			return agentError(failure)
		}
		if current && done != nil && done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return errPending
		case <-time.After(pollInterval):
		}
	}
}
