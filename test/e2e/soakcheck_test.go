//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/test/soakmodel"
)

// The soak's invariants. Each check counts in the report under its name;
// a violation is a test error (the soak goes on, to find more).

// verify reads every writer's log and file on c's volume through its pod
// and checks them against the writes acknowledged so far (verifyWrites);
// the writer must never have failed (its container restarts on a failed
// write).
func (s *clusterSoak) verify(c *soakClaim, when string) {
	s.t.Helper()
	var p corev1.Pod
	if err := get(context.Background(), c.pod.Name, &p); err != nil {
		s.t.Fatal(err)
	}
	c.pod = &p
	if cs := containerStatus(&p, "app"); cs == nil || cs.RestartCount != 0 {
		s.t.Errorf("claim %s: writer %s failed and restarted: %+v", c.Name, p.Name, cs)
	}
	seen, err := parseWrites(inContainer(s.t, &p, "sh", "-c", soakReadScript))
	if err != nil {
		s.t.Fatalf("claim %s, pod %s: the writers' logs: %v", c.Name, p.Name, err)
	}
	now, learnt, checked, problems := verifyWrites(c.Writes, seen)
	s.verdicts.Problems(fmt.Sprintf("claim %s (%s, PV %s), %s", c.Name, c.Layout.Name, c.LV, when), problems)
	c.Writes = now
	s.stats.Checked("acknowledged writes read back")
	s.stats.Writes(learnt, checked)
}

// bind learns c's PV and volume handle once it is bound, and checks that
// the volume is on c's node, where its pods are pinned (a handle is
// node/vg/lv): a restore across nodes, or a move, put it there.
func (s *clusterSoak) bind(c *soakClaim) {
	if c.LV == "" {
		c.LV = boundClaim(s.t, c.Name).Spec.VolumeName
		var pv corev1.PersistentVolume
		if err := get(context.Background(), c.LV, &pv); err != nil {
			s.t.Fatal(err)
		}
		c.ID = pv.Spec.CSI.VolumeHandle
	}
	if node, _, _ := strings.Cut(c.ID, "/"); node != c.Node {
		s.t.Errorf("claim %s: its volume %s is on node %q, want %s, where its pods run", c.Name, c.ID, node, c.Node)
	}
	s.stats.Checked("volume on its claim's node")
}

// checkFilesystem: the filesystem the pod sees spans the claim, but for
// ext4's own overhead (a restore into a larger claim, an expansion: grown).
func (s *clusterSoak) checkFilesystem(c *soakClaim) {
	got := fsSize(s.t, c.pod)
	if least := c.Size - max(c.Size/8, 32*mi); got < least {
		s.t.Errorf("claim %s of %d MiB: its filesystem in %s has %d MiB, want at least %d", c.Name, c.Size/mi, c.pod.Name, got/mi, least/mi)
	}
	s.stats.Checked("filesystem spans its claim")
}

// checkDetached: once its pod is gone and its attachment too, the volume
// is unmounted and its LV inactive.
func (s *clusterSoak) checkDetached(c *soakClaim, p *corev1.Pod) {
	if l, err := lvInfo(c.LV); err != nil || l == nil || l.Active != "" {
		s.t.Errorf("claim %s detached: its LV %+v (%v), want it there, inactive", c.Name, l, err)
	}
	for _, path := range []string{stagingPath(c.ID), publishPath(p, c.LV)} {
		if m, err := mounted(c.Node, path); m || err != nil { // writerPod pins its pods there
			s.t.Errorf("claim %s detached: %s still mounted (%v)", c.Name, path, err)
		}
	}
	s.stats.Checked("detached: unmounted, LV inactive")
}

func (s *clusterSoak) checkLVGone(lv, what string) {
	if l, err := lvInfo(lv); err != nil || l != nil {
		s.t.Errorf("LV %s %s: %+v (%v), want it gone", lv, what, l, err)
	}
	s.stats.Checked("deleted: LV gone")
}

// readySnapshot learns a ready snapshot's content and LV, and checks its
// restore size: its source's LV size.
func (s *clusterSoak) readySnapshot(sn *soakmodel.Snapshot, vs *unstructured.Unstructured) {
	sn.ID, _, _ = unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName")
	size, _, _ := unstructured.NestedString(vs.Object, "status", "restoreSize")
	if q, err := resource.ParseQuantity(size); err != nil || q.Value() != sn.Size {
		s.t.Errorf("snapshot %s: restoreSize %q, want %d MiB, its source's LV", sn.Name, size, sn.Size/mi)
	}
	content := volumeSnapshotContent()
	if err := h.kc.Get(context.Background(), soakKey(sn.ID, content), content); err != nil {
		s.t.Fatal(err)
	}
	handle, _, _ := unstructured.NestedString(content.Object, "status", "snapshotHandle")
	parts := strings.Split(handle, "/")
	if len(parts) != 3 || parts[0] != sn.Node || parts[1] != "e2e" {
		s.t.Fatalf("snapshot %s: handle %q, want %s/e2e/LV, on its source's node", sn.Name, handle, sn.Node)
	}
	sn.LV = parts[2]
}

// check runs every invariant on a cluster at rest.
func (s *clusterSoak) check(kind string) {
	s.logf("%s check: %d claims (%d with a writer), %d snapshots", kind, len(s.model.Volumes),
		len(s.model.Idle(func(c *soakClaim) bool { return c.pod != nil })), len(s.model.Snapshots))
	for _, c := range s.model.Volumes {
		if c.pod != nil {
			s.verify(c, kind+" check")
		}
	}
	s.checkObjects()
	for _, node := range s.nodes {
		vg := s.readVG(node)
		s.checkLVs(node, vg.extent)
		s.checkMounts(node)
		s.checkCapacity(node, vg)
	}
	s.stats.FullCheck()
}

// checkObjects: the claims, PVs, attachments, snapshots, moves and
// Carve's resources are exactly the model's, each in its wanted state, on
// its node.
func (s *clusterSoak) checkObjects() {
	ctx := context.Background()
	var pvcs corev1.PersistentVolumeClaimList
	var pvs corev1.PersistentVolumeList
	var lvs v1alpha1.LogicalVolumeList
	var lvss v1alpha1.LogicalVolumeSnapshotList
	var vas storagev1.VolumeAttachmentList
	var moves v1alpha1.VolumeMoveList
	vss := &unstructured.UnstructuredList{}
	vss.SetAPIVersion("snapshot.storage.k8s.io/v1")
	vss.SetKind("VolumeSnapshotList")
	for _, l := range []client.ObjectList{&pvcs, &pvs, &lvs, &lvss, &vas, &moves, vss} {
		if err := h.kc.List(ctx, l); err != nil {
			s.t.Fatal(err)
		}
	}
	wantClaims, wantVolumes, wantAttached, wantSnaps, wantSnapLVs := map[string]string{}, map[string]bool{}, map[string]string{}, map[string]bool{}, map[string]bool{}
	for _, c := range s.model.Volumes {
		wantClaims[c.Name], wantVolumes[c.LV] = c.LV, c.pod != nil
		if c.pod != nil {
			wantAttached[c.LV] = c.Node
		}
	}
	for _, sn := range s.model.Snapshots {
		wantSnaps[sn.Name], wantSnapLVs[sn.LV] = true, true
	}
	got := map[string]string{}
	for _, c := range pvcs.Items {
		if c.Labels[soakLabel] == "true" {
			got[c.Name] = c.Spec.VolumeName
			if c.Status.Phase != corev1.ClaimBound {
				s.t.Errorf("claim %s is %s", c.Name, c.Status.Phase)
			}
		}
	}
	soakmodel.Same(s.verdicts, "claims (name: PV)", got, wantClaims)
	gotPVs := map[string]bool{}
	for _, pv := range pvs.Items {
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == testNS && strings.HasPrefix(ref.Name, "soak-") {
			gotPVs[pv.Name] = pv.Status.Phase == corev1.VolumeBound
		}
	}
	soakmodel.Same(s.verdicts, "PVs of the soak's claims (name: bound)", gotPVs, boolsOf(wantVolumes, true))
	soakmodel.Same(s.verdicts, "LogicalVolumes (name: published)", s.logicalVolumes(lvs.Items, wantVolumes), wantVolumes)
	gotSnapLVs := map[string]bool{}
	for _, l := range lvss.Items {
		if !s.base[l.Spec.NodeName].lvs[l.Name] {
			gotSnapLVs[l.Name] = l.Status.ReadyToUse
		}
	}
	soakmodel.Same(s.verdicts, "LogicalVolumeSnapshots (name: ready)", gotSnapLVs, wantSnapLVs)
	gotSnaps := map[string]bool{}
	for _, vs := range vss.Items {
		if vs.GetLabels()[soakLabel] == "true" {
			gotSnaps[vs.GetName()], _, _ = unstructured.NestedBool(vs.Object, "status", "readyToUse")
		}
	}
	soakmodel.Same(s.verdicts, "VolumeSnapshots (name: ready)", gotSnaps, wantSnaps)
	gotAttached := map[string]string{}
	for _, va := range vas.Items {
		if va.Spec.Attacher == driverName && va.Spec.Source.PersistentVolumeName != nil {
			gotAttached[*va.Spec.Source.PersistentVolumeName] = va.Spec.NodeName
			if !va.Status.Attached {
				gotAttached[*va.Spec.Source.PersistentVolumeName] += " (not attached)"
			}
		}
	}
	soakmodel.Same(s.verdicts, "VolumeAttachments (PV: node attached to)", gotAttached, wantAttached)
	gotMoves := map[string]v1alpha1.MovePhase{}
	for _, m := range moves.Items {
		if m.Labels[soakLabel] == "true" {
			gotMoves[m.Name] = m.Status.Phase
		}
	}
	soakmodel.Same(s.verdicts, "VolumeMoves (name: phase; every move done and deleted)", gotMoves, map[string]v1alpha1.MovePhase{})
	s.stats.Checked("objects as the model")
}

// logicalVolumes maps Carve's LogicalVolumes (but the VGs' own from before
// the soak) to whether they are published on their claim's node, and
// checks each is on that node, Ready, at its size.
func (s *clusterSoak) logicalVolumes(items []v1alpha1.LogicalVolume, want map[string]bool) map[string]bool {
	sizes, nodes := map[string]int64{}, map[string]string{}
	for _, c := range s.model.Volumes {
		sizes[c.LV], nodes[c.LV] = c.Layout.LVSize(c.Size, s.base[c.Node].extent), c.Node
	}
	got := map[string]bool{}
	for _, l := range items {
		if s.base[l.Spec.NodeName].lvs[l.Name] {
			continue
		}
		got[l.Name] = l.Spec.PublishedNode == nodes[l.Name] && l.Status.Published
		ready := l.Ready()
		if _, ok := want[l.Name]; ok && (ready == nil || ready.Status != metav1.ConditionTrue || l.Status.SizeBytes != sizes[l.Name] || l.Spec.NodeName != nodes[l.Name]) {
			s.t.Errorf("LogicalVolume %s on %s: %d bytes, want %d on %s; Ready %+v", l.Name, l.Spec.NodeName, l.Status.SizeBytes, sizes[l.Name], nodes[l.Name], ready)
		}
	}
	return got
}

func boolsOf(m map[string]bool, v bool) map[string]bool {
	out := map[string]bool{}
	for k := range maps.Keys(m) {
		out[k] = v
	}
	return out
}

// checkEnd: after everything was deleted, nothing of the soak is left in
// the cluster or in LVM, and the capacity is what it was.
func (s *clusterSoak) checkEnd() {
	if len(s.model.Volumes)+len(s.model.Snapshots) != 0 {
		s.t.Fatalf("the model still holds objects after the deletes:\n%s", s.describe())
	}
	s.verdicts.Ending = true
	s.check("end")
	ctx := context.Background()
	vscs := &unstructured.UnstructuredList{}
	vscs.SetAPIVersion("snapshot.storage.k8s.io/v1")
	vscs.SetKind("VolumeSnapshotContentList")
	if err := h.kc.List(ctx, vscs); err != nil {
		s.t.Fatal(err)
	}
	for _, c := range vscs.Items {
		if d, _, _ := unstructured.NestedString(c.Object, "spec", "driver"); d == driverName {
			s.stats.Leak("VolumeSnapshotContent " + c.GetName())
			s.t.Errorf("leaked: VolumeSnapshotContent %s of a deleted snapshot", c.GetName())
		}
	}
	for _, node := range s.nodes {
		s.checkStorageCapacity(node, s.readVG(node))
	}
	checkNoLeaks(s.t)
	for _, node := range s.nodes {
		if names := slices.Sorted(maps.Keys(s.base[node].lvs)); len(names) != 1 || names[0] != "thinpool" {
			s.t.Logf("note: VG e2e on %s held %v before the soak", node, names)
		}
	}
}
