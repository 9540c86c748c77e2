package backend

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// requestCounter counts the HTTP requests of a client.
type requestCounter struct {
	n  atomic.Int64
	rt http.RoundTripper
}

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// cachedCluster is cluster with the backend as carve controller runs it:
// reads that may lag from an informer cache, waits woken by its watches.
// The returned counter counts the backend's own requests to the API (the
// cache's list and watch are apart).
func cachedCluster(t *testing.T) (*Backend, *lvmfake.LVM, *requestCounter) {
	t.Helper()
	counter := &requestCounter{}
	cfg := rest.CopyConfig(server.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter }
	c := apiClient(t, cfg)
	f := lvmfake.New(100*mib, "vg0")
	startAgent(t, lvmvol.NewManager(lvmvol.Config{LVM: f, Wiper: f, Node: "node-a", VolumeGroups: []string{"vg0"}}))
	ca, changes := watchedCache(t)
	return &Backend{Client: c, Cache: ca, Changes: changes, VGs: []string{"vg0"}}, f, counter
}

// watchedCache is an informer cache of the test API, synced, with the
// Changes its watches feed (WatchWith), as carve controller wires them.
func watchedCache(t *testing.T) (cache.Cache, *Changes) {
	t.Helper()
	ca, err := cache.New(server.Config, cache.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	changes, err := WatchWith(ctx, ca)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		t.Fatal("cache not synced")
	}
	return ca, changes
}

// watched is the Changes of a backend whose Cache is the API client: a
// watch of the test API wakes its waits, as the cache's watches wake
// carve controller's. A wait subscribes before it reads the API, so a
// change its read missed wakes it when the watch reports it.
func watched(t *testing.T) *Changes {
	t.Helper()
	_, changes := watchedCache(t)
	return changes
}

// TestWaitsAreWokenByWatches: with a cache, the backend waits for the
// agent by watching, not by asking the API again and again: each operation
// costs its own read and write and nothing while it waits, and each ends
// as soon as the agent is done, long before the waits' safety re-read
// (resync) would have noticed.
func TestWaitsAreWokenByWatches(t *testing.T) {
	b, _, counter := cachedCluster(t)
	ctx := within(t)
	// The client's first request of a kind learns the API (discovery):
	// made before counting.
	if _, err := b.GetVolume(ctx, lvm.Fresh, volume.ID{Node: "node-a", VG: "vg0", LV: "none"}); err == nil {
		t.Fatal("a volume that does not exist was found")
	}
	var warm v1alpha1.LogicalVolume
	_ = b.Client.Get(ctx, client.ObjectKey{Name: "none"}, &warm)
	start := time.Now()
	before := counter.n.Load()
	vol, err := b.CreateVolume(ctx, req("pvc-w", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishVolume(ctx, vol.ID, "node-a"); err != nil {
		t.Fatal(err)
	}
	if err := b.UnpublishVolume(ctx, vol.ID, "node-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ExpandVolume(ctx, vol.ID, 16*mib, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteVolume(ctx, vol.ID); err != nil {
		t.Fatal(err)
	}
	// Two requests an operation: the read a write depends on, and the
	// write; the delete adds the API's word that the resource is gone. A
	// wait that polled the API would add one each 200 ms.
	if n := counter.n.Load() - before; n > 11 {
		t.Errorf("5 operations made %d requests to the API, want at most 11 (a read and a write each, and the delete's confirmation)", n)
	}
	if took := time.Since(start); took >= resync {
		t.Errorf("5 operations took %v: the waits were not woken by the watch", took)
	}
}

// TestIdleReadsCostTheAPINothing: what csi-provisioner and the CO poll
// (capacity, the lists, a volume's state) is answered from the cache.
func TestIdleReadsCostTheAPINothing(t *testing.T) {
	b, _, counter := cachedCluster(t)
	ctx := within(t)
	vol, err := b.CreateVolume(ctx, req("pvc-idle", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	before := counter.n.Load()
	for range 100 {
		if _, err := b.Capacity(ctx, "node-a", volume.OneVG("vg0"), volume.Type{}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ListVolumes(ctx, lvm.Fresh); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ListSnapshots(ctx, lvm.Fresh); err != nil {
			t.Fatal(err)
		}
		if got, err := b.GetVolume(ctx, lvm.Fresh, vol.ID); err != nil || got.ID != vol.ID {
			t.Fatalf("GetVolume: %+v, %v", got, err)
		}
	}
	if n := counter.n.Load() - before; n != 0 {
		t.Errorf("400 reads made %d requests to the API, want none", n)
	}
}
