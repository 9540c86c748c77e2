package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/apiserver"
	"carve.dev/carve/test/lvmfake"
)

const mib = 1 << 20

// server is the real API server of the package's tests (TestMain).
var server *apiserver.Server

func TestMain(m *testing.M) { os.Exit(apiserver.RunTests(m, &server)) }

// cluster is the API (a real API server), the node agent of node-a
// running as carve node runs it (a manager whose cache holds node-a's
// objects, reconciling on its watches), and the controller's backend
// reading the API alone: its Cache is the API client, a cache that never
// lags, and its waits are woken by a watch as carve controller's are
// (watched).
func cluster(t *testing.T) (*Backend, *lvmfake.LVM) {
	t.Helper()
	return clusterWith(t, nil)
}

// clusterWith is cluster with the node's Manager configured by setup.
func clusterWith(t *testing.T, setup func(*lvmvol.Config, *lvmfake.LVM)) (*Backend, *lvmfake.LVM) {
	t.Helper()
	c := apiClient(t, server.Config)
	f := lvmfake.New(100*mib, "vg0")
	cfg := lvmvol.Config{LVM: f, Wiper: f, Node: "node-a", VolumeGroups: []string{"vg0"}}
	if setup != nil {
		setup(&cfg, f)
	}
	startAgent(t, lvmvol.NewManager(cfg))
	return &Backend{Client: c, Cache: c, Changes: watched(t), VGs: []string{"vg0"}}, f
}

// apiClient is an uncached client of the test API; the API is emptied
// when the test ends.
func apiClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := apiserver.Reset(context.Background(), c); err != nil {
			t.Errorf("reset the API: %v", err)
		}
	})
	return c
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// startAgent runs node-a's agent over m until the test ends.
func startAgent(t *testing.T, m *lvmvol.Manager) {
	t.Helper()
	mgr, err := ctrl.NewManager(server.Config, manager.Options{
		Scheme: scheme(t), Cache: agent.CacheOptions("node-a"),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := mgr.GetClient()
	if err := (&agent.VolumeReconciler{Client: c, Node: "node-a", Volumes: m}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&agent.SnapshotReconciler{Client: c, Node: "node-a", Snapshots: m}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&agent.GroupSnapshotReconciler{Client: c, Node: "node-a", Groups: m}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	apiserver.RunManager(t, mgr)
}

func within(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func req(name string, size int64) volume.CreateRequest {
	return volume.CreateRequest{Name: name, Node: "node-a", VG: "vg0", RequiredBytes: size, ParamsDigest: "d"}
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if got := volume.CodeOf(err); got != code { // as the CSI layer answers
		t.Errorf("%s: code %v (%v), want %v", what, got, err, code)
	}
}

func TestVolumeLifecycleThroughResources(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	vol, err := b.CreateVolume(ctx, req("pvc-1", 5*mib))
	if err != nil {
		t.Fatal(err)
	}
	if vol.ID.String() != "node-a/vg0/pvc-1" || vol.SizeBytes != 8*mib {
		t.Fatalf("created %+v", vol)
	}
	if again, err := b.CreateVolume(ctx, req("pvc-1", 5*mib)); err != nil || again.ID != vol.ID {
		t.Errorf("repeated create: %+v, %v", again, err)
	}
	other := req("pvc-1", 5*mib)
	other.ParamsDigest = "x"
	if _, err := b.CreateVolume(ctx, other); !errors.Is(err, volume.ErrNameConflict) {
		t.Errorf("same name, other parameters: %v", err)
	}
	if _, err := b.PublishVolume(ctx, vol.ID, "node-b"); !errors.Is(err, volume.ErrNodeNotFound) {
		t.Errorf("attach to another node: %v", err)
	}
	dev, err := b.PublishVolume(ctx, vol.ID, "node-a")
	if err != nil || dev != "/dev/vg0/pvc-1" {
		t.Fatalf("attach: %q, %v", dev, err)
	}
	if l, _ := f.LV("vg0", "pvc-1"); !l.Active {
		t.Fatal("attached LV not active")
	}
	grown, err := b.ExpandVolume(ctx, vol.ID, 16*mib, 0)
	if err != nil || grown.SizeBytes != 16*mib {
		t.Fatalf("expand: %+v, %v", grown, err)
	}
	if err := b.DeleteVolume(ctx, vol.ID); !errors.Is(err, volume.ErrInUse) {
		t.Errorf("delete attached: %v, want ErrInUse", err)
	}
	if err := b.UnpublishVolume(ctx, vol.ID, "node-a"); err != nil {
		t.Fatal(err)
	}
	if l, _ := f.LV("vg0", "pvc-1"); l.Active {
		t.Fatal("detached LV still active")
	}
	if vols, err := b.ListVolumes(ctx, lvm.Fresh); err != nil || len(vols) != 1 {
		t.Errorf("list: %+v, %v", vols, err)
	}
	if err := b.DeleteVolume(ctx, vol.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.LV("vg0", "pvc-1"); ok {
		t.Fatal("LV left after delete")
	}
	if err := b.DeleteVolume(ctx, vol.ID); err != nil {
		t.Errorf("second delete: %v", err)
	}
}

func TestAgentFailuresReachTheCO(t *testing.T) {
	b, _ := cluster(t)
	ctx := within(t)
	_, err := b.CreateVolume(ctx, req("pvc-big", 500*mib))
	wantCode(t, "too big for the node", err, codes.ResourceExhausted)
	noNode := req("pvc-x", mib)
	noNode.Node = ""
	_, err = b.CreateVolume(ctx, noNode)
	wantCode(t, "no node", err, codes.InvalidArgument)

	// The refused attempt carved nothing: its resource is dropped.
	var lv v1alpha1.LogicalVolume
	if err := b.Client.Get(ctx, client.ObjectKey{Name: "pvc-big"}, &lv); err == nil && lv.DeletionTimestamp.IsZero() {
		t.Errorf("the refused attempt's resource was not dropped: %+v", lv.Spec)
	}

	// The CO reschedules to another node while an attempt that carved
	// nothing is still there (here: one the agent has not carved yet):
	// that attempt is dropped, and the CO's retry starts afresh.
	attempt := resourceFor(req("pvc-elsewhere", 500*mib))
	attempt.Spec.NodeName = "node-c" // no agent: never carved
	if err := b.Client.Create(ctx, attempt); err != nil {
		t.Fatal(err)
	}
	moved := req("pvc-elsewhere", 500*mib)
	moved.Node = "node-b"
	_, err = b.CreateVolume(ctx, moved)
	wantCode(t, "moving to another node", err, codes.Aborted)
	if err := b.Client.Get(ctx, client.ObjectKey{Name: "pvc-elsewhere"}, &lv); err == nil && lv.DeletionTimestamp.IsZero() {
		t.Errorf("the earlier attempt's resource was not dropped: %+v", lv.Spec)
	}
}

// TestCapacityFromNodeStorage: the agent reports, the controller answers
// GetCapacity from the report with standalone mode's rules.
func TestCapacityFromNodeStorage(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	f.PutThinPool("vg0", "pool", 40*mib, 50)
	m := lvmvol.NewManager(lvmvol.Config{LVM: f, Wiper: f, Node: "node-a", VolumeGroups: []string{"vg0"}, Overprovision: 2})
	rep := &agent.StorageReporter{Client: b.Client, Node: "node-a", Space: m.Space, Overprovision: 2}
	for range 2 { // the second report updates the resource the first made
		if err := rep.Report(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		node string
		t    volume.Type
		want volume.Capacity
	}{
		{"node-a", volume.Type{}, volume.Capacity{AvailableBytes: 60 * mib, MaximumVolumeBytes: 60 * mib}},
		{"node-a", volume.Type{ThinPool: "pool"}, volume.Capacity{AvailableBytes: 40 * mib, MaximumVolumeBytes: 40 * mib}},
		{"node-a", volume.Type{Mirrors: 1}, volume.Capacity{}}, // one PV: no raid1
		{"node-b", volume.Type{}, volume.Capacity{}},
	} {
		got, err := b.Capacity(ctx, tc.node, volume.OneVG("vg0"), tc.t)
		if err != nil || got != tc.want {
			t.Errorf("Capacity(%s, %+v) = %+v, %v; want %+v", tc.node, tc.t, got, err, tc.want)
		}
	}
	if direct, err := m.Capacity(ctx, "node-a", volume.OneVG("vg0"), volume.Type{ThinPool: "pool"}); err != nil || direct.AvailableBytes != 40*mib {
		t.Errorf("standalone answer %+v, %v differs from the cluster one", direct, err)
	}
	// A VG whose metadata area is full takes no volume of any type, with
	// data space to spare: in both modes, through the agent's report.
	f.SetMetadataArea("vg0", 1<<20, volume.MetadataReserve-1)
	if err := rep.Report(ctx); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []volume.Type{{}, {ThinPool: "pool"}} {
		if got, err := b.Capacity(ctx, "node-a", volume.OneVG("vg0"), typ); err != nil || got != (volume.Capacity{}) {
			t.Errorf("metadata full: Capacity(%+v) = %+v, %v; want none", typ, got, err)
		}
		if got, err := m.Capacity(ctx, "node-a", volume.OneVG("vg0"), typ); err != nil || got != (volume.Capacity{}) {
			t.Errorf("metadata full, standalone: Capacity(%+v) = %+v, %v; want none", typ, got, err)
		}
	}
	// A VG missing a PV takes no volume either (lvm2 changes none of its
	// metadata), though its report shows space; back, it takes them again.
	f.SetMetadataArea("vg0", 1<<20, 1<<20)
	for _, missing := range []int{1, 0} {
		f.SetMissingPVs("vg0", missing)
		if err := rep.Report(ctx); err != nil {
			t.Fatal(err)
		}
		for _, typ := range []volume.Type{{}, {ThinPool: "pool"}} {
			got, err := b.Capacity(ctx, "node-a", volume.OneVG("vg0"), typ)
			direct, derr := m.Capacity(ctx, "node-a", volume.OneVG("vg0"), typ)
			if err != nil || derr != nil || (got == volume.Capacity{}) != (missing > 0) || got != direct {
				t.Errorf("%d PVs missing: Capacity(%+v) = %+v, %v; standalone %+v, %v", missing, typ, got, err, direct, derr)
			}
		}
	}
}

// thinSnapshot makes a thin volume in a new pool and snapshots it.
func thinSnapshot(ctx context.Context, t *testing.T, b *Backend, f *lvmfake.LVM) (volume.Volume, volume.Snapshot) {
	t.Helper()
	f.PutThinPool("vg0", "pool", 40*mib, 0)
	thin := req("pvc-src", 8*mib)
	thin.Type = volume.Type{ThinPool: "pool"}
	vol, err := b.CreateVolume(ctx, thin)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := b.CreateSnapshot(ctx, "snapshot-1", vol.ID)
	if err != nil {
		t.Fatal(err)
	}
	return vol, snap
}

// TestThinSnapshotAndRestoreThroughResources: snapshot, list, restore from
// it, delete it, all through resources the agent carries out.
func TestThinSnapshotAndRestoreThroughResources(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	vol, snap := thinSnapshot(ctx, t, b, f)
	if !snap.Ready || snap.Source != vol.ID {
		t.Fatalf("snapshot %+v of %s", snap, vol.ID)
	}
	if again, err := b.CreateSnapshot(ctx, "snapshot-1", vol.ID); err != nil || again.ID != snap.ID {
		t.Errorf("repeated CreateSnapshot: %+v, %v", again, err)
	}
	if list, err := b.ListSnapshots(ctx, lvm.Fresh); err != nil || len(list) != 1 {
		t.Errorf("ListSnapshots = %+v, %v", list, err)
	}
	restore := req("pvc-restored", 16*mib)
	restore.Type = volume.Type{ThinPool: "pool"}
	restore.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: snap.ID}
	restored, err := b.CreateVolume(ctx, restore)
	if err != nil || restored.SizeBytes != 16*mib || restored.Source == nil {
		t.Fatalf("restore: %+v, %v", restored, err)
	}
	if err := b.DeleteSnapshot(ctx, snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetSnapshot(ctx, lvm.Fresh, snap.ID); !errors.Is(err, volume.ErrSnapshotNotFound) {
		t.Errorf("deleted snapshot still there: %v", err)
	}
	if _, ok := f.LV("vg0", snap.ID.LV); ok {
		t.Error("snapshot LV left behind")
	}
}

// A node that refuses a volume for want of space leaves no resource behind:
// the CO's retry starts afresh, so space freed meanwhile is used at once.
func TestRefusedVolumeIsRetriedAfresh(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	if _, err := f.CreateLV(ctx, lvm.CreateLVOptions{VG: "vg0", Name: "filler", Size: 90 * mib}); err != nil {
		t.Fatal(err)
	}
	_, err := b.CreateVolume(ctx, req("pvc-tight", 20*mib))
	wantCode(t, "no room on the node", err, codes.ResourceExhausted)
	awaitDeleted(ctx, t, b.Client, &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-tight"}})
	if err := f.RemoveLV(ctx, "vg0", "filler"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateVolume(ctx, req("pvc-tight", 20*mib)); err != nil {
		t.Fatalf("retry after space was freed: %v", err)
	}
}

// While the node copies a clone's data, CreateVolume keeps waiting and,
// when its deadline comes first, answers ABORTED (in progress: the CO
// retries) with how far the copy has got, never a failure; the retry
// after the copy gets the volume.
func TestCreateWaitsOutABackgroundCopy(t *testing.T) {
	var release func()
	b, _ := clusterWith(t, func(cfg *lvmvol.Config, f *lvmfake.LVM) {
		cfg.BackgroundDataWork, cfg.DataGrace, cfg.Copier = true, 10*time.Millisecond, f
		release = f.HoldCopies()
	})
	defer release()
	src, err := b.CreateVolume(within(t), req("pvc-src", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	r := req("pvc-clone", 8*mib)
	r.Source = &volume.ContentSource{Kind: volume.SourceVolume, ID: src.ID}
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = b.CreateVolume(short, r)
	wantCode(t, "create while the node copies", err, codes.Aborted)
	msg, want := status.Convert(err).Message(), "the node agent has not finished yet: Copying: copy of vg0/pvc-clone runs in the background: "
	if !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, "% done") {
		t.Errorf("message %q, want %q, the share done", msg, want)
	}
	release()
	if vol, err := b.CreateVolume(within(t), r); err != nil || vol.ID.LV != "pvc-clone" {
		t.Fatalf("create after the copy: %+v, %v", vol, err)
	}
}

// TestSnapshotDeleteFailureReachesTheCO: the agent's failure to remove a
// snapshot's LV ends DeleteSnapshot with its code, not with a wait until
// the CO's deadline (ABORTED, again and again).
func TestSnapshotDeleteFailureReachesTheCO(t *testing.T) {
	var refuse atomic.Bool
	b, f := clusterWith(t, func(_ *lvmvol.Config, f *lvmfake.LVM) {
		f.Fail = func(call string) error {
			if (call == "RemoveLV" || call == "RemoveLVOf") && refuse.Load() {
				return fmt.Errorf("lvremove: %w", lvm.ErrBusy)
			}
			return nil
		}
	})
	ctx := within(t)
	_, snap := thinSnapshot(ctx, t, b, f)
	refuse.Store(true)
	err := b.DeleteSnapshot(ctx, snap.ID)
	wantCode(t, "delete refused by the node", err, codes.FailedPrecondition)
	// The CO retries; until the agent has tried again, it hears the last
	// failure (current: no newer generation), then success, and only once
	// the LV is gone.
	refuse.Store(false)
	for err = b.DeleteSnapshot(ctx, snap.ID); err != nil; err = b.DeleteSnapshot(ctx, snap.ID) {
		if status.Code(err) != codes.FailedPrecondition || ctx.Err() != nil {
			t.Fatalf("delete once the node lets it: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := f.LV("vg0", snap.ID.LV); ok {
		t.Error("snapshot LV left behind")
	}
}

// Cluster mode carries encryption both ways: the request's in the
// LogicalVolume's spec, and what the node made (an encrypted volume, or a
// restore of an encrypted snapshot that did not ask) in its status, which
// the backend's volume reports to the CSI layer (the volume context).
func TestEncryptionThroughResources(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	f.PutThinPool("vg0", "pool", 40*mib, 0)
	enc := req("pvc-enc", 8*mib)
	enc.Type, enc.Encrypted = volume.Type{ThinPool: "pool"}, true
	vol, err := b.CreateVolume(ctx, enc)
	if err != nil || !vol.Encrypted {
		t.Fatalf("encrypted create: %+v, %v", vol, err)
	}
	snap, err := b.CreateSnapshot(ctx, "snapshot-enc", vol.ID)
	if err != nil {
		t.Fatal(err)
	}
	restore := req("pvc-restored", 8*mib)
	restore.Type = volume.Type{ThinPool: "pool"}
	restore.Source = &volume.ContentSource{Kind: volume.SourceSnapshot, ID: snap.ID}
	restored, err := b.CreateVolume(ctx, restore)
	if err != nil || !restored.Encrypted {
		t.Fatalf("restore of an encrypted snapshot: %+v, %v; want encrypted", restored, err)
	}
	if got, err := b.GetVolume(ctx, lvm.Fresh, restored.ID); err != nil || !got.Encrypted {
		t.Errorf("GetVolume of the restore: %+v, %v", got, err)
	}
}

// awaitDeleted waits until obj (its name set) is gone from the API: the
// agent removed what it holds and let it go.
func awaitDeleted(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s is still there (%v): %v", obj.GetName(), obj.GetDeletionTimestamp(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPublishRefusedWhileMoved: a volume a VolumeMove holds
// (AnnotationMovedBy) is not attached anywhere new (FAILED_PRECONDITION,
// naming the move), while a retry of the attach it has still answers;
// once the hold goes, it attaches again.
func TestPublishRefusedWhileMoved(t *testing.T) {
	b, f := cluster(t)
	ctx := within(t)
	vol, err := b.CreateVolume(ctx, req("pvc-held", 5*mib))
	if err == nil {
		_, err = b.PublishVolume(ctx, vol.ID, "node-a") // the pod that runs until the cut-over
	}
	if err != nil {
		t.Fatal(err)
	}
	hold := func(move string) {
		annotate(ctx, t, b.Client, "pvc-held", map[string]string{v1alpha1.AnnotationMovedBy: move})
	}
	hold("shop/data-web-0-to-node-b")
	if _, err := b.PublishVolume(ctx, vol.ID, "node-a"); err != nil {
		t.Errorf("a retry of the attach the volume has: %v", err)
	}
	if err := b.UnpublishVolume(ctx, vol.ID, "node-a"); err != nil {
		t.Fatal(err)
	}
	_, err = b.PublishVolume(ctx, vol.ID, "node-a")
	wantCode(t, "attach of a volume being moved", err, codes.FailedPrecondition)
	if err == nil || !strings.Contains(err.Error(), "shop/data-web-0-to-node-b") {
		t.Errorf("the refusal does not name the move: %v", err)
	}
	if l, _ := f.LV("vg0", "pvc-held"); l.Active {
		t.Error("a refused attach activated the LV")
	}
	hold("")
	if _, err := b.PublishVolume(ctx, vol.ID, "node-a"); err != nil {
		t.Errorf("attach once the hold is gone: %v", err)
	}
}
