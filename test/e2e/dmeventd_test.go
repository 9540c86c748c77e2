//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"carve.dev/carve/driver/api/v1alpha1"
)

// Issue 37, dmeventd: the VM nodes' lvm.conf extends a monitored thin pool
// by 20 % once it is 80 % full (scripts/vm/guest.sh, production profile),
// as administrators set it. A workload fills a thin volume past that
// while Carve serves; dmeventd extends the pool behind Carve's back, and
// Carve's reports follow: the node's NodeStorage shows the bigger pool,
// and the VG's smaller free space reaches CSIStorageCapacity, which the
// scheduler places thick volumes by.
//
// It changes a node's capacity, so it runs alone (no t.Parallel).
func TestThinPoolAutoextends(t *testing.T) {
	create(t, pvc("brim", "carve-thin", "1Gi"))
	p := runPod(t, "brim-1", "brim")
	node := p.Spec.NodeName
	before := poolSize(t, node)
	checkCapacities(t, "before the pool fills")

	// 85 % of the pool, synced: past the threshold, short of full.
	fill := before * 85 / 100 / mi
	start := time.Now()
	inContainer(t, p, "dd", "if=/dev/zero", "of=/data/fill", "bs=1M", fmt.Sprintf("count=%d", fill), "conv=fsync")
	t.Logf("%d MiB written in %s", fill, time.Since(start).Round(time.Second))

	var after int64
	wait(t, "dmeventd extending the thin pool on "+node, 3*time.Minute, func(context.Context) (bool, error) {
		after = poolSize(t, node)
		return after > before, nil
	})
	t.Logf("dmeventd extended the thin pool from %d to %d MiB %s after the write", before/mi, after/mi,
		time.Since(start).Round(time.Second))
	wait(t, "NodeStorage of "+node+" showing the extended pool", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var ns v1alpha1.NodeStorage
		if err := h.kc.Get(ctx, types.NamespacedName{Name: node}, &ns); err != nil {
			return false, err
		}
		for _, vg := range ns.Status.VolumeGroups {
			for _, pool := range vg.ThinPools {
				if vg.Name == "e2e" && pool.Name == "thinpool" {
					return pool.SizeBytes == after, nil
				}
			}
		}
		return false, nil
	})
	checkCapacities(t, "after dmeventd extended the pool")

	deletePod(t, "brim-1")
	deleteClaim(t, "brim")
}

// poolSize is the size of VG e2e's thin pool on node, from lvs.
func poolSize(t *testing.T, node string) int64 {
	t.Helper()
	out, err := nodeVM(t, node).sh("lvs", "--noheadings", "--units", "b", "--nosuffix", "-o", "lv_size", "e2e/thinpool")
	if err != nil {
		t.Fatal(err)
	}
	return parseBytes(t, strings.TrimSpace(out))
}
