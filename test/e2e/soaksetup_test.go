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

	"carve.dev/carve/test/soakmodel"
)

// soakClasses are the StorageClasses the soak's claims use. The e2e's
// install has carve-thick and carve-thin; the VM node's VG has two PVs, so
// the soak adds a striped and a raid1 class of its own (Params), removed
// at its end.
var soakClasses = []*soakmodel.Layout{
	{Name: "carve-thick", Segtype: "linear"},
	{Name: "carve-thin", Segtype: "thin"},
	{Name: "carve-soak-striped", Params: map[string]string{"stripes": "2"}, Segtype: "striped"},
	{Name: "carve-soak-raid1", Params: map[string]string{"mirrors": "1"}, Segtype: "raid1"},
}

// soakBase is the VM node's VG before the soak: what it must be again
// after.
type soakBase struct {
	free, extent int64
	lvs          map[string]bool
}

// setUp makes the soak's classes and records the VG at rest.
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
	for _, comp := range []string{"controller", "node"} {
		if p := carvePod(s.t, comp, soakNodeOf(comp)); !podReady(p) {
			s.t.Fatalf("carve %s is not ready before the soak: %s", comp, podSummary(p))
		}
	}
	vg := s.readVG()
	s.base = soakBase{free: vg.free, extent: vg.extent, lvs: map[string]bool{}}
	for _, l := range s.readLVs() {
		s.base.lvs[l.name] = true
	}
	s.checkNodeStorage(vg)
	s.logf("VG e2e on %s: %d MiB free, extent %d MiB, LVs before: %v", vmNode, vg.free/mi, vg.extent/mi, slices.Sorted(maps.Keys(s.base.lvs)))
}

// cleanUp deletes whatever the soak made that is still there: nothing
// after a passing run but its classes; after a failure, so that the
// scenarios after it start clean.
func (s *clusterSoak) cleanUp() {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sel := client.MatchingLabels{soakLabel: "true"}
	for _, obj := range []client.Object{&corev1.Pod{}, volumeSnapshot("", ""), &corev1.PersistentVolumeClaim{}} {
		if err := h.kc.DeleteAllOf(ctx, obj, client.InNamespace(testNS), sel); err != nil {
			s.t.Logf("cleanup: delete %s: %v", kindOf(obj), err)
		}
	}
	err := h.waitFor("the soak's PVs gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
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

// soakNodeOf is the node of Carve's component in the e2e: the controller
// on the host node, carve node's pod of interest on the VM node.
func soakNodeOf(component string) string {
	if component == "controller" {
		return hostNode
	}
	return vmNode
}

// kill SIGKILLs the carve container of carve controller, carve node or
// both, as a crash would: kubelet restarts it in its pod. A component
// still coming back from the previous kill is left alone. Its recovery is
// an operation of its own, with the same deadline.
func (s *clusterSoak) kill() {
	targets := pick(s, [][]string{{"controller"}, {"controller"}, {"node"}, {"node"}, {"controller", "node"}})
	for _, comp := range targets {
		if s.recovering[comp] {
			s.stats.Count("kills skipped (still coming back)")
			continue
		}
		node := soakNodeOf(comp)
		p := carvePod(s.t, comp, node)
		before := restarts(p, "carve")
		inFlight := s.inFlight()
		killContainer(s.t, p, "carve", "SIGKILL")
		s.stats.Kill(comp, inFlight)
		s.recovering[comp] = true
		s.push(&soakOp{recovery: true, kind: "recover " + comp,
			what: fmt.Sprintf("SIGKILL carve %s (%d operations in flight)", comp, inFlight),
			reached: func(ctx context.Context) (bool, error) {
				pods, all, err := carvePods(ctx, comp, node)
				if err != nil || len(pods) != 1 {
					return false, fmt.Errorf("%d carve %s pods on %s (%v): %s", len(pods), comp, node, err, podsState(all))
				}
				return restarts(pods[0], "carve") > before && podReady(pods[0]), fmt.Errorf("carve %s: %s", comp, podSummary(pods[0]))
			},
			done: func() { s.recovering[comp] = false }})
	}
}
