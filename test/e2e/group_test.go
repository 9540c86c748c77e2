//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// groupLabel selects the claims of TestVolumeGroupSnapshot's group.
const groupLabel = "carve-e2e-group"

// groupMember is one claim of the group: its class and the volume's path
// in the writer's pod.
type groupMember struct{ claim, class, dir string }

// Scenario: a VolumeGroupSnapshot, through csi-snapshotter and
// snapshot-controller, of two volumes (a thin one and a thick one) that
// one pod writes a shared counter to, 1, 2, 3... on each in turn. Each
// member restores; the restored counters are one instant's: equal, or the
// first volume's one ahead (the writer was between its two writes).
// Deleting the VolumeGroupSnapshot removes Carve's group and its LVs.
func TestVolumeGroupSnapshot(t *testing.T) {
	fullRunOnly(t)
	t.Parallel()
	members := []groupMember{{"grp-thin", "carve-thin", "/data"}, {"grp-thick", "carve-thick", "/data2"}}
	for _, m := range members {
		c := pvc(m.claim, m.class, "128Mi")
		c.Labels = map[string]string{groupLabel: "db"}
		create(t, c)
	}
	p := runPodWith(t, "grp-writer", members[0].claim, counterWriter(members[1].claim))
	wait(t, "the writer counting", 2*time.Minute, func(context.Context) (bool, error) {
		return counterIn(t, p, "/data2") >= 20, nil
	})

	start := time.Now()
	vgs := volumeGroupSnapshot("grp-snap", map[string]string{groupLabel: "db"})
	create(t, vgs)
	wait(t, "VolumeGroupSnapshot grp-snap readyToUse", 5*time.Minute, func(ctx context.Context) (bool, error) {
		if err := h.kc.Get(ctx, client.ObjectKeyFromObject(vgs), vgs); err != nil {
			return false, err
		}
		ready, _, _ := unstructured.NestedBool(vgs.Object, "status", "readyToUse")
		return ready, nil
	})
	logf("group snapshot ready after %v; the writer counted to %d meanwhile", time.Since(start).Round(time.Second), counterIn(t, p, "/data2"))
	logf("carve node: %s", heldWindow(t))
	lvs := carveGroupLVs(t, p.Spec.NodeName, len(members))

	snaps := memberSnapshots(t, vgs)
	var counts []int
	for _, m := range members {
		snap, ok := snaps[boundClaim(t, m.claim).Spec.VolumeName]
		if !ok {
			t.Fatalf("no member VolumeSnapshot of %s among %v", m.claim, snaps)
		}
		create(t, restoreClaim(m.claim+"-restored", m.class, "128Mi", snap))
		r := runPodWith(t, m.claim+"-restored-1", m.claim+"-restored", onNode(p.Spec.NodeName))
		counts = append(counts, counterIn(t, r, "/data"))
		deletePod(t, r.Name)
		deleteClaim(t, m.claim+"-restored")
	}
	logf("restored counters: thin %d, thick %d", counts[0], counts[1])
	if d := counts[0] - counts[1]; counts[1] < 20 || d < 0 || d > 1 {
		t.Errorf("restored counters %v are not one instant's", counts)
	}

	deletePod(t, p.Name)
	deleteGroupSnapshot(t, p.Spec.NodeName, vgs, lvs)
	for _, m := range members {
		deleteClaim(t, m.claim)
	}
}

// counterWriter mounts claim too, at /data2, and makes the pod write the
// counter to /data, then /data2, every 10 ms.
func counterWriter(claim string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data2", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		c := &p.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "data2", MountPath: "/data2"})
		c.Command = []string{"sh", "-c",
			`i=0; while :; do i=$((i+1)); echo $i >/data/counter; echo $i >/data2/counter; sleep 0.01 2>/dev/null || sleep 1; done`}
	}
}

// counterIn reads the counter of the volume at dir in pod p.
func counterIn(t *testing.T, p *corev1.Pod, dir string) int {
	t.Helper()
	out := strings.TrimSpace(inContainer(t, p, "cat", dir+"/counter"))
	n, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("counter in %s of %s: %q", dir, p.Name, out)
	}
	return n
}

var (
	groupGVK        = schema.GroupVersionKind{Group: "groupsnapshot.storage.k8s.io", Version: "v1", Kind: "VolumeGroupSnapshot"}
	groupContentGVK = schema.GroupVersionKind{Group: "groupsnapshot.storage.k8s.io", Version: "v1", Kind: "VolumeGroupSnapshotContent"}
	snapshotGVK     = schema.GroupVersionKind{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshot"}
)

// volumeGroupSnapshot is a VolumeGroupSnapshot of class carve (the
// example class) of the claims with labels.
func volumeGroupSnapshot(name string, labels map[string]string) *unstructured.Unstructured {
	match := map[string]any{}
	for k, v := range labels {
		match[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": name, "namespace": testNS},
		"spec": map[string]any{
			"volumeGroupSnapshotClassName": "carve",
			"source":                       map[string]any{"selector": map[string]any{"matchLabels": match}},
		},
	}}
	u.SetGroupVersionKind(groupGVK)
	return u
}

// memberSnapshots maps each member's volume handle (the PV's name is
// Carve's LV name, the handle's last part) to its VolumeSnapshot: the
// group's content pairs volume and snapshot handles, and each member
// VolumeSnapshot names its group.
func memberSnapshots(t *testing.T, vgs *unstructured.Unstructured) map[string]string {
	t.Helper()
	ctx := context.Background()
	contentName, _, _ := unstructured.NestedString(vgs.Object, "status", "boundVolumeGroupSnapshotContentName")
	content := &unstructured.Unstructured{}
	content.SetGroupVersionKind(groupContentGVK)
	if err := h.kc.Get(ctx, client.ObjectKey{Name: contentName}, content); err != nil {
		t.Fatalf("VolumeGroupSnapshotContent %q: %v", contentName, err)
	}
	pvOfSnapshot := map[string]string{}
	infos, _, _ := unstructured.NestedSlice(content.Object, "status", "volumeSnapshotInfoList")
	for _, i := range infos {
		m, _ := i.(map[string]any)
		vh, _ := m["volumeHandle"].(string)
		sh, _ := m["snapshotHandle"].(string)
		pvOfSnapshot[sh] = vh[strings.LastIndex(vh, "/")+1:]
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(snapshotGVK.GroupVersion().WithKind("VolumeSnapshotList"))
	if err := h.kc.List(ctx, list, client.InNamespace(testNS)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, vs := range list.Items {
		if g, _, _ := unstructured.NestedString(vs.Object, "status", "volumeGroupSnapshotName"); g != vgs.GetName() {
			continue
		}
		handle, err := snapshotHandle(ctx, &vs)
		if err != nil {
			t.Fatal(err)
		}
		out[pvOfSnapshot[handle]] = vs.GetName()
	}
	if len(out) != len(infos) || len(infos) == 0 {
		t.Fatalf("group content %s pairs %v; member VolumeSnapshots by PV: %v", contentName, pvOfSnapshot, out)
	}
	return out
}

// snapshotHandle is the CSI snapshot ID of VolumeSnapshot vs, from its
// content.
func snapshotHandle(ctx context.Context, vs *unstructured.Unstructured) (string, error) {
	name, _, _ := unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName")
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(snapshotGVK.GroupVersion().WithKind("VolumeSnapshotContent"))
	if err := h.kc.Get(ctx, client.ObjectKey{Name: name}, c); err != nil {
		return "", fmt.Errorf("VolumeSnapshotContent %q of %s: %w", name, vs.GetName(), err)
	}
	handle, _, _ := unstructured.NestedString(c.Object, "status", "snapshotHandle")
	return handle, nil
}

// carveGroupLVs checks Carve's side of the group, its resource: on node,
// with n members ready, whose LV names it returns.
func carveGroupLVs(t *testing.T, node string, n int) []string {
	t.Helper()
	var list v1alpha1.LogicalVolumeGroupSnapshotList
	if err := h.kc.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d LogicalVolumeGroupSnapshots, want 1", len(list.Items))
	}
	g := list.Items[0]
	if g.Spec.NodeName != node || !g.Status.ReadyToUse || len(g.Status.Members) != n {
		t.Fatalf("LogicalVolumeGroupSnapshot %s: node %s, status %+v", g.Name, g.Spec.NodeName, g.Status)
	}
	var lvs []string
	for _, m := range g.Status.Members {
		lvs = append(lvs, m.SnapshotID[strings.LastIndex(m.SnapshotID, "/")+1:])
	}
	return lvs
}

// heldWindow is what carve node on the VM logged of the group's window
// (the layers held and for how long).
func heldWindow(t *testing.T) string {
	t.Helper()
	out, err := h.kubectl("logs", "-n", driverNS, "-l", "app.kubernetes.io/component=node", "-c", "carve", "--tail=-1")
	if err != nil {
		t.Fatalf("carve node's logs: %v", err)
	}
	held := regexp.MustCompile(`Held the volumes' I/O for a snapshot.*`)
	var last string
	for _, l := range strings.Split(out, "\n") {
		if m := held.FindString(l); m != "" && strings.Count(m, "-carve") >= 2 {
			last = m
		}
	}
	if last == "" {
		t.Error("carve node logged no window holding two layers")
	}
	return last
}

// deleteGroupSnapshot deletes vgs and waits until it, Carve's group and
// its members' LVs are gone.
func deleteGroupSnapshot(t *testing.T, node string, vgs *unstructured.Unstructured, members []string) {
	t.Helper()
	if err := h.kc.Delete(context.Background(), vgs); err != nil {
		t.Fatal(err)
	}
	wait(t, "VolumeGroupSnapshot, its members and Carve's group gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		if ok, err := gone(h.kc.Get(ctx, client.ObjectKeyFromObject(vgs), vgs)); !ok {
			return false, err
		}
		var groups v1alpha1.LogicalVolumeGroupSnapshotList
		if err := h.kc.List(ctx, &groups); err != nil || len(groups.Items) > 0 {
			return false, err
		}
		lvs, err := listLVs(node)
		for _, l := range lvs {
			if slices.Contains(members, l.Name) {
				return false, err
			}
		}
		return err == nil, err
	})
}
