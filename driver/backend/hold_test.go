package backend

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/test/lvmfake"
)

// TestPublishChecksWhatItPatches: an attach whose read of the volume came
// before a move's hold, which is written between that read and the
// attach's patch (the move's controller runs beside the attacher), is
// refused (FAILED_PRECONDITION, the LV left inactive, publishedNode
// empty): the patch tests the hold it checked, fails that test, and the
// read and check done again see the hold. Unconditional, the patch
// recorded publishedNode past the hold and the volume was attached. Run
// on a volume without annotations (the test is of the map) and on one
// with another annotation (the test is of the hold's key).
func TestPublishChecksWhatItPatches(t *testing.T) {
	for _, other := range []map[string]string{nil, {"example.com/owner": "shop"}} {
		t.Run(map[bool]string{true: "no annotations", false: "another annotation"}[other == nil], func(t *testing.T) {
			b, f, ctx, id := carved(t, "pvc-raced")
			direct := watchClient(t)
			if other != nil {
				annotate(ctx, t, direct, "pvc-raced", other)
			}
			var held atomic.Bool
			b.Client = interceptor.NewClient(direct, interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if _, ok := obj.(*v1alpha1.LogicalVolume); ok && held.CompareAndSwap(false, true) {
						annotate(ctx, t, c, obj.GetName(), map[string]string{v1alpha1.AnnotationMovedBy: "shop/data-web-0-to-node-b"})
					}
					return c.Patch(ctx, obj, patch, opts...)
				},
			})
			_, err := b.PublishVolume(ctx, id, "node-a")
			if !held.Load() {
				t.Fatal("the attach patched nothing: the race was not made")
			}
			wantCode(t, "an attach raced by a move's hold", err, codes.FailedPrecondition)
			var lv v1alpha1.LogicalVolume
			if err := direct.Get(ctx, client.ObjectKey{Name: "pvc-raced"}, &lv); err != nil || lv.Spec.PublishedNode != "" {
				t.Errorf("publishedNode %q after the refused attach (%v)", lv.Spec.PublishedNode, err)
			}
			if l, _ := f.LV("vg0", "pvc-raced"); l.Active {
				t.Error("a refused attach activated the LV")
			}
		})
	}
}

// TestPublishIsNotRacedByStatus: a status update of the volume (as the
// agent makes all the time) between the attach's read and its patch does
// not touch the hold, so the attach's one patch lands and the volume is
// attached. A patch conditional on the resource version, tried first,
// conflicted with every such update.
func TestPublishIsNotRacedByStatus(t *testing.T) {
	b, _, ctx, id := carved(t, "pvc-busy")
	direct := watchClient(t)
	var patches atomic.Int32
	b.Client = interceptor.NewClient(direct, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if lv, ok := obj.(*v1alpha1.LogicalVolume); ok && patches.Add(1) == 1 {
				busy := lv.DeepCopy()
				busy.Status.Health = []v1alpha1.HealthProblem{{Kind: "Degraded", Reason: "StatusMoved"}}
				if err := c.Status().Patch(ctx, busy, client.MergeFrom(lv)); err != nil {
					t.Errorf("status update: %v", err)
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	if _, err := b.PublishVolume(ctx, id, "node-a"); err != nil {
		t.Fatalf("attach raced by a status update: %v", err)
	}
	if n := patches.Load(); n != 1 {
		t.Errorf("the attach patched %d times, want once", n)
	}
}

// carved is a cluster with one 5 MiB volume name carved on node-a.
func carved(t *testing.T, name string) (*Backend, *lvmfake.LVM, context.Context, volume.ID) {
	t.Helper()
	b, f := cluster(t)
	ctx := within(t)
	vol, err := b.CreateVolume(ctx, req(name, 5*mib))
	if err != nil {
		t.Fatal(err)
	}
	return b, f, ctx, vol.ID
}

// watchClient is an uncached client of the test API that an interceptor
// can wrap.
func watchClient(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(server.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// annotate sets the annotations of volume name to set (a merge patch, as
// the move's controller writes its hold); a key of "" in set is removed.
func annotate(ctx context.Context, t *testing.T, c client.Client, name string, set map[string]string) {
	t.Helper()
	var lv v1alpha1.LogicalVolume
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &lv); err != nil {
		t.Fatal(err)
	}
	before := lv.DeepCopy()
	if lv.Annotations == nil {
		lv.Annotations = map[string]string{}
	}
	for k, v := range set {
		if v == "" {
			delete(lv.Annotations, k)
		} else {
			lv.Annotations[k] = v
		}
	}
	if err := c.Patch(ctx, &lv, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
}
