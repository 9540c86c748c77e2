package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/disks"
	"carve.dev/carve/driver/lvmvol"
)

// keeperRig is a DiskKeeper over a fake node (its disks, a labelled Node
// in the API) and the rig's NodeStorage.
func keeperRig(t *testing.T, r *rig, labels map[string]string) (*DiskKeeper, *diskLVM, *events.FakeRecorder) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(server.Config)
	if err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: labels}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })
	nodes, err := client.New(server.Config, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	dn := &diskNode{disks: []disks.Disk{disk("vdb", 10<<30), disk("vdc", 10<<30)},
		sigs: map[string]disks.Signatures{"/dev/vdb": {}, "/dev/vdc": {Type: "xfs", Usage: "filesystem", Label: "old"}}}
	l := &diskLVM{}
	rec := events.NewFakeRecorder(10)
	vols := lvmvol.NewManager(lvmvol.Config{LVM: r.lvm, Wiper: r.lvm, Node: node, VolumeGroups: []string{"vg0"}})
	rep := &StorageReporter{Client: r.c, Node: node, Space: vols.Space, Overprovision: 1, Events: rec}
	k := &DiskKeeper{Setup: dn.setup(l), Declaration: filepath.Join(t.TempDir(), "disks.yaml"), Nodes: nodes, Storage: rep}
	return k, l, rec
}

func refusalsOn(t *testing.T, r *rig) []v1alpha1.DiskRefusal {
	t.Helper()
	var ns v1alpha1.NodeStorage
	if err := r.c.Get(ctx, types.NamespacedName{Name: node}, &ns); err != nil {
		t.Fatal(err)
	}
	return ns.Status.DiskRefusals
}

// A pass carries out the declaration for the node its labels select and
// writes the refusals into the NodeStorage, each told once by a Warning
// event; an edit of the file takes effect at the next pass; an invalid
// declaration changes nothing; no file declares nothing.
func TestDiskKeeperReportsRefusals(t *testing.T) {
	r := newRig(t)
	k, l, rec := keeperRig(t, r, map[string]string{"carve.dev/disks": "nvme"})
	write := func(yaml string) {
		if err := os.WriteFile(k.Declaration, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`
volumeGroups:
- volumeGroup: vg0
  nodeSelector: {carve.dev/disks: nvme}
  paths: ["/dev/vdb", "/dev/vdc"]
`)
	for range 2 {
		if err := k.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []v1alpha1.DiskRefusal{{VolumeGroup: "vg0", Device: "/dev/vdc",
		Reason: `holds a xfs filesystem (label "old"): wipe it with wipefs -a if its data is not needed`}}
	if got := refusalsOn(t, r); !slices.Equal(got, want) {
		t.Errorf("refusals %+v, want %+v", got, want)
	}
	wantEvents(t, rec, `Warning DiskRefused /dev/vdc, declared for volume group vg0, holds a xfs filesystem (label "old")`)
	l.took(t, "vgcreate vg0 /dev/vdb", "vgcreate vg0 /dev/vdb") // the fake lists no PV: each pass creates

	write("volumeGroups: [{volumeGroup: vg0, paths: [/dev/vdb], bogus: 1}]")
	if err := k.Pass(ctx); err == nil {
		t.Error("an invalid declaration passed")
	}
	if got := refusalsOn(t, r); !slices.Equal(got, want) {
		t.Errorf("refusals after an invalid declaration %+v, want them as they were", got)
	}

	if err := os.Remove(k.Declaration); err != nil {
		t.Fatal(err)
	}
	if err := k.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got := refusalsOn(t, r); len(got) != 0 {
		t.Errorf("no declaration: refusals %+v, want none", got)
	}
	l.took(t)
	wantEvents(t, rec)
}
