package agent

import (
	"context"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/test/apiserver"
	"carve.dev/carve/test/lvmfake"
)

const (
	node = "node-a"
	mib  = 1 << 20
)

var ctx = context.Background()

// server is the real API server of the package's tests (TestMain).
var server *apiserver.Server

func TestMain(m *testing.M) { os.Exit(apiserver.RunTests(m, &server)) }

type rig struct {
	t   *testing.T
	c   client.Client
	lvm *lvmfake.LVM
	r   *VolumeReconciler
}

func newRig(t *testing.T, objs ...client.Object) *rig {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(server.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := apiserver.Reset(context.Background(), c); err != nil {
			t.Errorf("reset the API: %v", err)
		}
	})
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	r := &rig{t: t, c: c, lvm: lvmfake.New(100*mib, "vg0"), r: &VolumeReconciler{Client: c, Node: node}}
	r.withManager(lvmvol.Config{})
	return r
}

// withManager gives the rig's reconciler a Manager of cfg over the rig's
// fake, as a carve node (re)started so would have.
func (r *rig) withManager(cfg lvmvol.Config) {
	cfg.LVM, cfg.Wiper, cfg.Node, cfg.VolumeGroups = r.lvm, r.lvm, node, []string{"vg0"}
	r.r.Volumes = lvmvol.NewManager(cfg)
}

func lvResource(name, onNode string, size int64) *v1alpha1.LogicalVolume {
	return &v1alpha1.LogicalVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.LogicalVolumeSpec{Name: name, NodeName: onNode, VolumeGroup: "vg0", RequiredBytes: size, ParamsDigest: "d"},
	}
}

// reconcile runs one reconcile and returns the resource afterwards (nil
// when it is gone) and the reconcile error.
func (r *rig) reconcile(name string) (*v1alpha1.LogicalVolume, error) {
	_, err := r.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	var lv v1alpha1.LogicalVolume
	if getErr := r.c.Get(ctx, types.NamespacedName{Name: name}, &lv); getErr != nil {
		return nil, err
	}
	return &lv, err
}

func (r *rig) update(lv *v1alpha1.LogicalVolume, change func(*v1alpha1.LogicalVolume)) {
	change(lv)
	if err := r.c.Update(ctx, lv); err != nil {
		r.t.Fatal(err)
	}
}

func TestCreatePublishExpandDelete(t *testing.T) {
	r := newRig(t, lvResource("pvc-1", node, 5*mib))
	lv, err := r.reconcile("pvc-1")
	if err != nil {
		t.Fatal(err)
	}
	if lv.Status.Phase != v1alpha1.PhaseReady || lv.Status.VolumeID != "node-a/vg0/pvc-1" || lv.Status.SizeBytes != 8*mib || lv.Status.Published {
		t.Fatalf("status after create %+v", lv.Status)
	}
	if len(lv.Finalizers) != 1 {
		t.Fatalf("finalizers %v", lv.Finalizers)
	}
	if l, _ := r.lvm.LV("vg0", "pvc-1"); l.Active {
		t.Fatal("created LV is active before any publish")
	}

	r.update(lv, func(lv *v1alpha1.LogicalVolume) { lv.Spec.PublishedNode = node })
	if lv, err = r.reconcile("pvc-1"); err != nil || !lv.Status.Published || lv.Status.DevicePath != "/dev/vg0/pvc-1" {
		t.Fatalf("after publish: %+v, %v", lv.Status, err)
	}
	if l, _ := r.lvm.LV("vg0", "pvc-1"); !l.Active {
		t.Fatal("published LV not active")
	}
	r.update(lv, func(lv *v1alpha1.LogicalVolume) { lv.Spec.PublishedNode = ""; lv.Spec.RequiredBytes = 20 * mib })
	if lv, err = r.reconcile("pvc-1"); err != nil || lv.Status.Published || lv.Status.SizeBytes != 20*mib {
		t.Fatalf("after unpublish and grow: %+v, %v", lv.Status, err)
	}
	if l, _ := r.lvm.LV("vg0", "pvc-1"); l.Active || l.Size != 20*mib {
		t.Fatalf("LV %+v: want inactive, 20 MiB", l)
	}

	if err := r.c.Delete(ctx, lv); err != nil {
		t.Fatal(err)
	}
	if lv, err = r.reconcile("pvc-1"); err != nil || lv != nil {
		t.Fatalf("after delete: %+v, %v; want the resource gone", lv, err)
	}
	if _, ok := r.lvm.LV("vg0", "pvc-1"); ok || len(r.lvm.Wiped) != 1 {
		t.Fatalf("LV left after delete, or not wiped (%v)", r.lvm.Wiped)
	}
}

func TestOtherNodesVolumesAreLeftAlone(t *testing.T) {
	r := newRig(t, lvResource("pvc-b", "node-b", 4*mib))
	lv, err := r.reconcile("pvc-b")
	if err != nil || len(lv.Finalizers) != 0 || lv.Status.Phase != "" {
		t.Fatalf("another node's volume touched: %+v, %v", lv, err)
	}
	if len(r.lvm.Calls) != 0 {
		t.Fatalf("LVM called for another node's volume: %v", r.lvm.Calls)
	}
}

func TestFailureIsReportedWithItsCode(t *testing.T) {
	r := newRig(t, lvResource("pvc-big", node, 500*mib))
	lv, err := r.reconcile("pvc-big")
	if err == nil {
		t.Fatal("reconcile of a volume that cannot fit succeeded")
	}
	if lv.Status.Phase != v1alpha1.PhaseFailed || lv.Status.Error == nil || lv.Status.Error.Code != "ResourceExhausted" {
		t.Fatalf("status %+v: want Failed with ResourceExhausted", lv.Status)
	}
}

func TestVanishedVolumeIsNotRecreatedBlank(t *testing.T) {
	r := newRig(t, lvResource("pvc-1", node, 4*mib))
	if _, err := r.reconcile("pvc-1"); err != nil {
		t.Fatal(err)
	}
	if err := r.lvm.RemoveLV(ctx, "vg0", "pvc-1"); err != nil { // an administrator's lvremove
		t.Fatal(err)
	}
	lv, err := r.reconcile("pvc-1")
	if err == nil || lv.Status.Phase != v1alpha1.PhaseFailed || lv.Status.Error.Code != "NotFound" {
		t.Fatalf("after the LV vanished: %+v, %v; want Failed/NotFound", lv.Status, err)
	}
	if _, ok := r.lvm.LV("vg0", "pvc-1"); ok {
		t.Fatal("a vanished volume was recreated blank")
	}
	if _, err := r.reconcile("pvc-1"); err == nil {
		t.Fatal("second reconcile of a vanished volume succeeded")
	}
	if _, ok := r.lvm.LV("vg0", "pvc-1"); ok {
		t.Fatal("a vanished volume was recreated blank by a later reconcile")
	}
}

func TestPublishToAnotherNodeIsRefused(t *testing.T) {
	v := lvResource("pvc-1", node, 4*mib)
	v.Spec.PublishedNode = "node-b"
	r := newRig(t, v)
	lv, err := r.reconcile("pvc-1")
	if err == nil || lv.Status.Error == nil || lv.Status.Error.Code != "NotFound" {
		t.Fatalf("publish elsewhere: %+v, %v", lv.Status, err)
	}
	if l, _ := r.lvm.LV("vg0", "pvc-1"); l.Active {
		t.Fatal("LV activated for another node")
	}
}

// An encrypted LogicalVolume carves an LV marked encrypted, and says so in
// its status; a clone of it whose spec does not ask for encryption is
// encrypted all the same (its data is the source's ciphertext), and its
// status tells the controller, which tells NodeStage.
func TestEncryptedVolumeAndItsClone(t *testing.T) {
	src := lvResource("pvc-enc", node, 8*mib)
	src.Spec.Encrypted = true
	clone := lvResource("pvc-clone", node, 8*mib)
	clone.Spec.Source = &v1alpha1.ContentSource{Kind: "volume", ID: "node-a/vg0/pvc-enc"}
	for _, lv := range []*v1alpha1.LogicalVolume{src, clone} {
		lv.Spec.Type.ThinPool = "pool" // a thin clone: lvmfake copies no data
	}
	r := newRig(t, src, clone)
	r.lvm.PutThinPool("vg0", "pool", 40*mib, 0)
	lv, err := r.reconcile("pvc-enc")
	if err != nil || !lv.Status.Encrypted {
		t.Fatalf("encrypted volume's status %+v, %v", lv.Status, err)
	}
	if l, _ := r.lvm.LV("vg0", "pvc-enc"); !l.HasTag("carve.dev/encrypted") {
		t.Errorf("LV tags %v: want carve.dev/encrypted", l.Tags)
	}
	if lv, err = r.reconcile("pvc-clone"); err != nil || !lv.Status.Encrypted {
		t.Fatalf("clone's status %+v, %v: want encrypted", lv.Status, err)
	}
}
