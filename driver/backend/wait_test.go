package backend

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// slowReader is an API read that outlasts the call's deadline: it returns
// only when ctx ends, with ctx's error, as client-go does.
type slowReader struct{ client.Reader }

func (slowReader) Get(ctx context.Context, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestAWaitCutInAReadIsPending: whether the CO's deadline ends while the
// wait sleeps or while it reads the resource, the agent is still at work
// and the answer is ABORTED (the CO retries), not DEADLINE_EXCEEDED or an
// internal "get" failure; TestCreateWaitsOutABackgroundCopy failed now and
// then on a loaded machine, its 1 s deadline spent in a read.
func TestAWaitCutInAReadIsPending(t *testing.T) {
	b := &Backend{Cache: slowReader{}, Changes: NewChanges()}
	nothing := func() (int64, *v1alpha1.OperationError) { return 0, nil }
	for name, wait := range map[string]func(context.Context, *v1alpha1.LogicalVolume) error{
		"a create's wait": func(ctx context.Context, lv *v1alpha1.LogicalVolume) error {
			return b.awaitDone(ctx, KindVolume, lv, 1, nothing, func() bool { return true })
		},
		"a delete's wait": func(ctx context.Context, lv *v1alpha1.LogicalVolume) error {
			return b.awaitGone(ctx, KindVolume, lv, nothing)
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		lv := &v1alpha1.LogicalVolume{}
		lv.Name = "pvc-slow"
		err := wait(ctx, lv)
		cancel()
		if status.Code(err) != codes.Aborted {
			t.Errorf("%s cut in a read: %v, want ABORTED", name, err)
		}
	}
}
