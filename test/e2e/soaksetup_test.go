//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/test/soakmodel"
)

// soakClasses are the StorageClasses the soak's claims use. The e2e's
// install has carve-thick and carve-thin; each VM node's VG has two PVs,
// so the soak adds a striped and a raid1 class of its own (Params), removed
// at its end.
var soakClasses = []*soakmodel.Layout{
	{Name: "carve-thick", Segtype: "linear"},
	{Name: "carve-thin", Segtype: "thin"},
	{Name: "carve-soak-striped", Params: map[string]string{"stripes": "2"}, Segtype: "striped"},
	{Name: "carve-soak-raid1", Params: map[string]string{"mirrors": "1"}, Segtype: "raid1"},
}

// soakBase is a VM node's VG before the soak: what it must be again
// after.
type soakBase struct {
	free, extent int64
	lvs          map[string]bool
}

// setUp makes the soak's classes and records each VM node's VG at rest.
func (s *clusterSoak) setUp() {
	for _, c := range soakClasses {
		if c.Params == nil {
			continue
		}
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: c.Name, Labels: map[string]string{soakLabel: "true"}},
			Provisioner: driverName, Parameters: map[string]string{"csi.storage.k8s.io/fstype": "ext4"},
			VolumeBindingMode: new(storagev1.VolumeBindingWaitForFirstConsumer), AllowVolumeExpansion: new(true),
			ReclaimPolicy: new(corev1.PersistentVolumeReclaimDelete)}
		for k, v := range c.Params {
			sc.Parameters[k] = v
		}
		create(s.t, sc)
	}
	for _, target := range soakKillTargets(hostNode, s.nodes) {
		if p := carvePod(s.t, target.component, target.node); !podReady(p) {
			s.t.Fatalf("carve %s is not ready before the soak: %s", target, podSummary(p))
		}
	}
	for _, node := range s.nodes {
		vg := s.readVG(node)
		base := soakBase{free: vg.free, extent: vg.extent, lvs: map[string]bool{}}
		for _, l := range s.readLVs(node) {
			base.lvs[l.name] = true
		}
		s.base[node] = base
		s.checkNodeStorage(node, vg)
		s.logf("VG e2e on %s: %d MiB free, extent %d MiB, LVs before: %v", node, vg.free/mi, vg.extent/mi, slices.Sorted(maps.Keys(base.lvs)))
	}
}

// cleanUp deletes whatever the soak made that is still there: nothing
// after a passing run but its classes; after a failure, so that the
// scenarios after it start clean. Moves go first, and are waited for:
// one deleted mid-way is undone (its hold on the claim's volume with it),
// but one in its swap is finished, and would make its claim again after
// the claim's deletion.
func (s *clusterSoak) cleanUp() {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	sel := client.MatchingLabels{soakLabel: "true"}
	if err := h.kc.DeleteAllOf(ctx, &v1alpha1.VolumeMove{}, client.InNamespace(testNS), sel); err != nil {
		s.t.Logf("cleanup: delete the soak's VolumeMoves: %v", err)
	}
	err := h.waitFor("the soak's VolumeMoves gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var moves v1alpha1.VolumeMoveList
		err := h.kc.List(ctx, &moves, client.InNamespace(testNS), sel)
		return err == nil && len(moves.Items) == 0, err
	})
	if err != nil {
		s.t.Logf("cleanup: %v", err)
	}
	for _, obj := range []client.Object{&corev1.Pod{}, volumeSnapshot("", ""), &corev1.PersistentVolumeClaim{}} {
		if err := h.kc.DeleteAllOf(ctx, obj, client.InNamespace(testNS), sel); err != nil {
			s.t.Logf("cleanup: delete %s: %v", kindOf(obj), err)
		}
	}
	err = h.waitFor("the soak's PVs gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var pvs corev1.PersistentVolumeList
		err := h.kc.List(ctx, &pvs)
		for _, pv := range pvs.Items {
			if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == testNS && strings.HasPrefix(ref.Name, "soak-") {
				return false, err
			}
		}
		return err == nil, err
	})
	if err != nil {
		s.t.Logf("cleanup: %v", err)
	}
	if err := h.kc.DeleteAllOf(ctx, &storagev1.StorageClass{}, sel); err != nil {
		s.t.Logf("cleanup: delete the soak's StorageClasses: %v", err)
	}
}

// kill SIGKILLs the carve container of carve controller, of carve node
// on a VM node, or of several (soakKillChoices), as a crash would:
// kubelet restarts it in its pod. A container still coming back from the
// previous kill is left alone. Its recovery is an operation of its own,
// with the same deadline.
func (s *clusterSoak) kill() {
	for _, target := range pick(s, soakKillChoices(hostNode, s.nodes)) {
		s.killOne(target)
	}
}

// killOne SIGKILLs target's carve container and follows its recovery.
func (s *clusterSoak) killOne(target soakTarget) {
	name := target.String()
	if s.recovering[name] {
		s.stats.Count("kills skipped (still coming back)")
		return
	}
	p := carvePod(s.t, target.component, target.node)
	before := restarts(p, "carve")
	inFlight, across := s.inFlight()
	killContainer(s.t, p, "carve", "SIGKILL")
	s.stats.Kill(name, inFlight)
	if across > 0 {
		s.stats.Count("kills with a restore across nodes or a move in flight")
	}
	s.kills = append(s.kills, soakKill{at: time.Now(), what: name})
	s.recovering[name] = true
	s.push(&soakOp{recovery: true, kind: "recover " + name,
		what: fmt.Sprintf("SIGKILL carve %s (%d operations in flight, %d across nodes)", name, inFlight, across),
		reached: func(ctx context.Context) (bool, error) {
			pods, all, err := carvePods(ctx, target.component, target.node)
			if err != nil || len(pods) != 1 {
				return false, fmt.Errorf("%d carve %s pods on %s (%v): %s", len(pods), target.component, target.node, err, podsState(all))
			}
			return restarts(pods[0], "carve") > before && podReady(pods[0]), fmt.Errorf("carve %s: %s", name, podSummary(pods[0]))
		},
		done: func() { s.recovering[name] = false }})
}
