package backend

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// A wait cut short tells what the agent reports at work on the resource
// now: the Ready condition of its current generation, not Ready; an
// older report, or none, adds nothing; other errors pass as they are.
func TestStillAtWorkSaysWhatRuns(t *testing.T) {
	at := func(gen, observed int64, st metav1.ConditionStatus, msg string) *v1alpha1.LogicalVolume {
		lv := &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", Generation: gen}}
		lv.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: st, Reason: "Copying",
			Message: msg, ObservedGeneration: observed}}
		return lv
	}
	copying := "copy of vg0/pvc-1 runs in the background: 40% done"
	for _, tc := range []struct {
		what string
		obj  client.Object
		err  error
		want string
	}{
		{"copying now", at(2, 2, metav1.ConditionFalse, copying), errPending, "the node agent has not finished yet: Copying: " + copying},
		{"an older report", at(3, 2, metav1.ConditionFalse, copying), errPending, "the node agent has not finished yet"},
		{"ready", at(2, 2, metav1.ConditionTrue, ""), errPending, "the node agent has not finished yet"},
		{"no report", &v1alpha1.LogicalVolume{}, errPending, "the node agent has not finished yet"},
		{"another error", at(2, 2, metav1.ConditionFalse, copying), status.Error(codes.Internal, "x"), "x"},
	} {
		got := stillAtWork(tc.obj, tc.err)
		if status.Convert(got).Message() != tc.want {
			t.Errorf("%s: %v, want %s", tc.what, got, tc.want)
		}
		if tc.err == errPending && status.Code(got) != codes.Aborted {
			t.Errorf("%s: code %v, want Aborted", tc.what, status.Code(got))
		}
	}
}
