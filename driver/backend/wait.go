package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// resync is how often a wait woken by Changes reads its resource anyway: a
// safety net only, since no change is missed (see Changes).
const resync = 10 * time.Second

// The backend's waits for the node agent: awaitDone until the agent has
// done what was asked of obj, awaitGone until it has let obj go. Both read
// obj (of kind, by its name) from the cache, then sleep until Changes says
// obj changed (or resync has passed), and read again.
//
// What they read may be older than the caller's last write (a cache
// lags): the status counts only once it is about generation minGen (the
// one the caller's write made) or later, and about the object's current
// generation. A failure the agent reports about that generation ends the
// wait with the failure's CSI code; an older one is stale and is waited
// out. When ctx ends first the agent is still at work: errPending.

// awaitDone waits until done() holds of obj. A NotFound is waited out: a
// resource just created may not be in the cache yet.
func (b *Backend) awaitDone(ctx context.Context, kind string, obj client.Object, minGen int64, rep report, done func() bool) error {
	name := obj.GetName()
	return stillAtWork(obj, b.awaitAgent(ctx, kind, obj, func(err error) (bool, error) {
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, readFailure(ctx, name, err)
		}
		failure, current := reported(obj, minGen, rep)
		if current && failure != nil {
			return false, agentError(failure)
		}
		return current && done(), nil
	}))
}

// stillAtWork is err, and when it is errPending, says what the agent
// last reported at work on obj (its Ready condition while data work
// runs: "Copying: copy of vg/lv runs in the background: 40% done"). The
// CO shows the error to the tenant (csi-provisioner's event on the
// claim), who has no right to read the resource.
func stillAtWork(obj client.Object, err error) error {
	if !errors.Is(err, errPending) {
		return err
	}
	r, ok := obj.(interface{ Ready() *metav1.Condition })
	if !ok {
		return err
	}
	// A current report that is not Ready and no failure is work under
	// way; an older one (a failure since retried) tells nothing of now.
	c := r.Ready()
	if c == nil || c.Status != metav1.ConditionFalse || c.ObservedGeneration != obj.GetGeneration() || c.Message == "" {
		return err
	}
	return status.Errorf(codes.Aborted, "the node agent has not finished yet: %s: %s", c.Reason, c.Message)
}

// awaitGone waits until obj no longer exists: the agent has removed what
// it holds and let it go. Only a report made since its deletion counts (a
// deletion raises the generation of a resource with finalizers), so a
// failure to delete is told from an earlier failure to create.
func (b *Backend) awaitGone(ctx context.Context, kind string, obj client.Object, rep report) error {
	name := obj.GetName()
	return b.awaitAgent(ctx, kind, obj, func(err error) (bool, error) {
		switch {
		case apierrors.IsNotFound(err):
			// A cache that never saw the resource says NotFound too:
			// the API has the last word on "gone".
			return b.goneFromAPI(ctx, name, obj)
		case err != nil:
			return false, readFailure(ctx, name, err)
		}
		failure, current := reported(obj, 0, rep)
		if current && failure != nil && !obj.GetDeletionTimestamp().IsZero() {
			return false, agentError(failure)
		}
		return false, nil
	})
}

// awaitAgent is the loop of the waits: it reads obj into itself and hands
// the read's error to over, until over says the wait is over or fails.
func (b *Backend) awaitAgent(ctx context.Context, kind string, obj client.Object, over func(readErr error) (bool, error)) error {
	key := types.NamespacedName{Name: obj.GetName()}
	for {
		changed := b.Changes.next(kind, key.Name)
		if ok, err := over(b.Cache.Get(ctx, key, obj)); err != nil || ok {
			return err
		}
		if err := sleep(ctx, changed); err != nil {
			return err
		}
	}
}

// reported reads what the agent last said of obj (rep), and whether it
// is current: about obj's generation, and that at least minGen.
func reported(obj client.Object, minGen int64, rep report) (*v1alpha1.OperationError, bool) {
	observed, failure := rep()
	return failure, observed == obj.GetGeneration() && observed >= minGen
}

// readFailure is a failed read of the resource name: errPending when the
// call's deadline ended in the read instead of the sleep (the same wait
// cut short, the agent still at work).
func readFailure(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		return errPending
	}
	return fmt.Errorf("get %s: %w", name, err)
}

// goneFromAPI asks the API, uncached, whether the resource name is gone
// (reading it into obj when it is not).
func (b *Backend) goneFromAPI(ctx context.Context, name string, obj client.Object) (bool, error) {
	err := b.Client.Get(ctx, types.NamespacedName{Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, readFailure(ctx, name, err)
	}
	return false, nil
}

// sleep waits for changed, at most resync.
func sleep(ctx context.Context, changed <-chan struct{}) error {
	select {
	case <-ctx.Done():
		return errPending
	case <-changed:
	case <-time.After(resync):
	}
	return nil
}
