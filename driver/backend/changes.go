package backend

import (
	"context"
	"fmt"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// Changes wakes the backend's waits when a resource they wait on changes:
// the cache's watch feeds it (Handler), so that waiting for the node agent
// costs the API server nothing. A wait subscribes before it reads the
// cache, so a change between its read and its sleep is never missed: the
// subscription is already there to be woken.
type Changes struct {
	mu      sync.Mutex
	waiters map[string]chan struct{}
}

// NewChanges makes an empty Changes.
func NewChanges() *Changes { return &Changes{waiters: map[string]chan struct{}{}} }

// next returns a channel that is closed at the next change of the resource
// kind/name.
func (c *Changes) next(kind, name string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := kind + "/" + name
	ch, ok := c.waiters[key]
	if !ok {
		ch = make(chan struct{})
		c.waiters[key] = ch
	}
	return ch
}

// Notify wakes every wait on the resource kind/name.
func (c *Changes) Notify(kind, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := kind + "/" + name
	if ch, ok := c.waiters[key]; ok {
		close(ch)
		delete(c.waiters, key)
	}
}

// Handler is the informer event handler that notifies the changes of
// resources of kind (KindVolume, KindSnapshot, KindGroupSnapshot).
func (c *Changes) Handler(kind string) toolscache.ResourceEventHandler {
	notify := func(obj any) {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if o, ok := obj.(client.Object); ok {
			c.Notify(kind, o.GetName())
		}
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}
}

// Kinds of resources, as Changes names them.
const (
	KindVolume        = "LogicalVolume"
	KindSnapshot      = "LogicalVolumeSnapshot"
	KindGroupSnapshot = "LogicalVolumeGroupSnapshot"
)

// WatchWith makes c watch what the backend reads (every LogicalVolume,
// LogicalVolumeSnapshot, LogicalVolumeGroupSnapshot and NodeStorage) and
// returns the Changes its watch events feed. Call it before c starts;
// carve controller and the tests wire the backend's cache with it.
func WatchWith(ctx context.Context, c cache.Informers) (*Changes, error) {
	changes := NewChanges()
	for kind, obj := range map[string]client.Object{
		KindVolume: &v1alpha1.LogicalVolume{}, KindSnapshot: &v1alpha1.LogicalVolumeSnapshot{},
		KindGroupSnapshot: &v1alpha1.LogicalVolumeGroupSnapshot{},
	} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("watch %s: %w", kind, err)
		}
		if _, err := inf.AddEventHandler(changes.Handler(kind)); err != nil {
			return nil, fmt.Errorf("watch %s: %w", kind, err)
		}
	}
	if _, err := c.GetInformer(ctx, &v1alpha1.NodeStorage{}); err != nil {
		return nil, fmt.Errorf("watch NodeStorage: %w", err)
	}
	return changes, nil
}
