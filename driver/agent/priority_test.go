package agent

import (
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"carve.dev/carve/driver/api/v1alpha1"
)

// TestPublishGoesFirst: with controller-runtime's priority queue (the
// controller's default), the handler puts a publish or unpublish ahead of
// creates queued before it, a queued volume's included, and leaves every
// other change in its order.
func TestPublishGoesFirst(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	h := &publishFirst{}
	lv := func(name, published, version string) *v1alpha1.LogicalVolume {
		v := lvResource(name, node, mib)
		v.Spec.PublishedNode, v.ResourceVersion = published, version
		return v
	}
	for _, name := range []string{"create-a", "create-b", "create-c"} {
		h.Create(ctx, event.CreateEvent{Object: lv(name, "", "1")}, q)
	}
	h.Update(ctx, event.UpdateEvent{ObjectOld: lv("resized", "", "1"), ObjectNew: lv("resized", "", "2")}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: lv("create-c", "", "1"), ObjectNew: lv("create-c", node, "2")}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: lv("unpublished", node, "1"), ObjectNew: lv("unpublished", "", "2")}, q)
	for end := time.Now().Add(5 * time.Second); q.Len() < 5 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	var got []string
	for q.Len() > 0 {
		req, _ := q.Get()
		got = append(got, req.Name)
		q.Done(req)
	}
	want := []string{"create-c", "unpublished", "create-a", "create-b", "resized"}
	if !slices.Equal(got, want) {
		t.Errorf("queue order %v, want %v", got, want)
	}
}
