//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"carve.dev/carve/driver/api/v1alpha1"
)

// Capacity: the VG's real free space against the model, and what Carve
// reports of it (NodeStorage, and through GetCapacity csi-provisioner's
// CSIStorageCapacity) against lvm2's own report.

// checkCapacity: the VG's free space on node is exactly what it was less
// the model's volumes and thick snapshots there, and carve node's
// NodeStorage of node says what lvm2 says.
func (s *clusterSoak) checkCapacity(node string, vg soakVG) {
	s.verdicts.Free("e2e on "+node, s.base[node].free, s.model.On(node).ThickUse(vg.extent), vg.free)
	s.checkNodeStorage(node, vg)
}

// checkNodeStorage waits for node's carve node's report (every 30 s) to
// say what lvm2 says: free space, each PV's free space, the extent, the thin
// pool's size, and its free space while the pool holds no thin LV (then
// exactly its size; with thin LVs, written to or not, the report's
// rounding of lvm2's percentage is the report's own business).
func (s *clusterSoak) checkNodeStorage(node string, vg soakVG) {
	var last string
	err := h.waitFor("NodeStorage of "+node+" as lvm2 reports", 90*time.Second, func(ctx context.Context) (bool, error) {
		var ns v1alpha1.NodeStorage
		if err := h.kc.Get(ctx, types.NamespacedName{Name: node}, &ns); err != nil {
			return false, err
		}
		last = fmt.Sprintf("%+v", ns.Status.VolumeGroups)
		return nodeStorageSays(ns, vg, s.model.On(node).HoldsThin()), nil
	})
	if err != nil {
		s.t.Errorf("%v: lvm2 says %+v; NodeStorage says %s", err, vg, last)
	}
	s.stats.Checked("NodeStorage as lvm2")
}

func nodeStorageSays(ns v1alpha1.NodeStorage, vg soakVG, thin bool) bool {
	for _, st := range ns.Status.VolumeGroups {
		if st.Name != "e2e" {
			continue
		}
		pv := slices.Clone(st.PVFreeBytes)
		slices.Sort(pv)
		if st.FreeBytes != vg.free || st.ExtentSize != vg.extent || !slices.Equal(pv, vg.pvFree) || len(st.ThinPools) != 1 {
			return false
		}
		p := st.ThinPools[0]
		return p.SizeBytes == vg.poolSize && (thin || p.FreeBytes == vg.poolFree)
	}
	return false
}

// checkStorageCapacity waits for csi-provisioner's CSIStorageCapacity of
// every class on VM node node (it asks GetCapacity every minute) to say
// what the capacity rules (README.md, StorageClass parameters) make of
// lvm2's report: thick, the VG's free space; thin, the pool's free space
// times the node's over-provisioning ratio; striped over the two PVs,
// the VG's free space, at most twice the smaller PV's free space in one
// volume; raid1, half the VG's free space, at most the smaller PV's less
// a metadata extent in one volume.
func (s *clusterSoak) checkStorageCapacity(node string, vg soakVG) {
	var ns v1alpha1.NodeStorage
	if err := h.kc.Get(context.Background(), types.NamespacedName{Name: node}, &ns); err != nil {
		s.t.Fatal(err)
	}
	ratio, err := strconv.ParseFloat(ns.Status.OverprovisionRatio, 64)
	if err != nil || vg.poolFree < 0 || len(vg.pvFree) != 2 {
		s.t.Fatalf("capacity rules on %s: ratio %q (%v), pool free %d, PVs %v", node, ns.Status.OverprovisionRatio, err, vg.poolFree, vg.pvFree)
	}
	want := map[string][2]int64{ // class: capacity, largest volume
		"carve-thick":        {vg.free, vg.free},
		"carve-thin":         {int64(float64(vg.poolFree) * ratio), int64(float64(vg.poolFree) * ratio)},
		"carve-soak-striped": {vg.free, 2 * vg.pvFree[0]},
		"carve-soak-raid1":   {vg.free / 2, vg.pvFree[0] - vg.extent},
	}
	got := map[string][2]int64{}
	err = h.waitFor("CSIStorageCapacity of every class on "+node+" by the capacity rules", 3*time.Minute, func(ctx context.Context) (bool, error) {
		for class := range want {
			c, err := storageCapacity(ctx, class, node)
			if err != nil || c.Capacity == nil || c.MaximumVolumeSize == nil {
				return false, err
			}
			got[class] = [2]int64{c.Capacity.Value(), c.MaximumVolumeSize.Value()}
		}
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})
	if err != nil {
		s.t.Errorf("%v: have %v, want %v (lvm2 on %s: %+v)", err, got, want, node, vg)
	}
	s.stats.Checked("CSIStorageCapacity by the rules")
}
