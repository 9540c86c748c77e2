//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"carve.dev/carve/driver/api/v1alpha1"
)

// dmeventd: the VM nodes' lvm.conf extends a monitored thin pool
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
	// On carve-vm2, whose pool is still the 1 GiB node-vm.sh made:
	// TestNodeAdministration grows carve-vm's, and 85 % of that would
	// not fit the claim.
	p := runPodWith(t, "brim-1", "brim", onNode(vmNode2))
	node := p.Spec.NodeName
	before := poolSize(t, node)
	if before > 1<<30 {
		t.Fatalf("the thin pool on %s is %d MiB: 85 %% of it does not fit the 1 GiB claim", node, before/mi)
	}
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

// dmeventd with autoextend off: the administrator of carve-vm
// keeps lvm2's default, thin_pool_autoextend_threshold = 100 (no
// autoextend), and two thin volumes that together promise more than the
// pool holds are written full. The pool fills up; lvm2 leaves it as it is.
// Carve then:
//   - answers a new thin volume in that pool RESOURCE_EXHAUSTED (a
//     VolumeSnapshot, which no scheduler places, reaches CreateSnapshot
//     and is refused so);
//   - reports no thin capacity on the node, so new claims go elsewhere;
//   - reports each volume already in the pool ThinPoolFull in its
//     LogicalVolume's health, with a Warning event.
//
// The administrator's way out (deploy/README.md: extend the pool) then
// clears all three: the snapshot is taken, the capacity is back, the
// health is clean.
//
// It changes carve-vm's lvm.conf and fills its pool, so it runs beside
// testDevicesFile only (TestNodeAdministration).
func testThinPoolFills(t *testing.T) {
	t.Parallel()
	const node = vmNode
	vm := nodeVM(t, node)
	setAutoextend(t, node, false)
	size := poolSize(t, node)
	if used := poolDataPercent(t, node); used > 5 {
		t.Fatalf("thin pool on %s is %.2f%% full before the test", node, used)
	}
	// Each 60 % of the pool: Carve makes both (deploy/'s example
	// over-provisioning ratio is 2), but together they outgrow it.
	each := size * 60 / 100 / mi
	p := blockPodOn(t, "overfill-1", node, "carve-thin", map[string]string{
		"first": fmt.Sprintf("%dMi", each), "second": fmt.Sprintf("%dMi", each)})
	start := time.Now()
	inContainer(t, p, "dd", "if=/dev/zero", "of=/dev/first", "bs=1M", fmt.Sprintf("count=%d", each), "oflag=direct")
	// The second fills the pool: lvm2's thin pools queue the writes that
	// find no room for 60 s, then fail them.
	out, err := inContainerErr(t, p, "dd", "if=/dev/zero", "of=/dev/second", "bs=1M", fmt.Sprintf("count=%d", each), "oflag=direct")
	if err == nil {
		t.Fatalf("%d MiB written past a full pool of %d MiB: %s", 2*each, size/mi, out)
	}
	t.Logf("the pool of %d MiB filled %s after the writes began; the second write failed: %v",
		size/mi, time.Since(start).Round(time.Second), err)
	if got := poolSize(t, node); got != size {
		t.Fatalf("the pool went from %d to %d MiB with autoextend off", size/mi, got/mi)
	}
	if used := poolDataPercent(t, node); used < 100 {
		t.Fatalf("thin pool on %s is %.2f%% full after the writes", node, used)
	}

	waitThinCapacity(t, node, func(v int64) bool { return v == 0 }, "0")
	vs := volumeSnapshot("overfill-snap", "first")
	if err := h.kc.Create(context.Background(), vs); err != nil {
		t.Fatal(err)
	}
	waitSnapshotError(t, vs, "ResourceExhausted")
	pvs := []string{boundClaim(t, "first").Spec.VolumeName, boundClaim(t, "second").Spec.VolumeName}
	for _, pv := range pvs {
		waitHealth(t, pv, "ThinPoolFull", true)
	}
	if out, err := vm.sh("lvs", "--noheadings", "-o", "lv_name,lv_size,data_percent", "e2e"); err == nil {
		t.Logf("on %s with the pool full:\n%s", node, out)
	}

	// The way out: the administrator extends the pool.
	if out, err := vm.sh("lvextend", "-q", "-L", fmt.Sprintf("+%dm", each), "e2e/thinpool"); err != nil {
		t.Fatalf("lvextend of the full pool: %v: %s", err, out)
	}
	waitSnapshotReady(t, vs)
	waitThinCapacity(t, node, func(v int64) bool { return v > 0 }, "more than 0")
	for _, pv := range pvs {
		waitHealth(t, pv, "ThinPoolFull", false)
	}

	deleteSnapshot(t, vs)
	deletePod(t, p.Name)
	deleteClaim(t, "second")
	deleteClaim(t, "first")
}

// setAutoextend sets node's thin pool autoextend policy as an
// administrator does, in lvmlocal.conf (the VM's production profile has it
// at 80 %); off is lvm2's default threshold, 100. Cleanup puts it back.
func setAutoextend(t *testing.T, node string, on bool) {
	t.Helper()
	vm := nodeVM(t, node)
	set := func(threshold int) {
		expr := fmt.Sprintf("s/thin_pool_autoextend_threshold = [0-9]*/thin_pool_autoextend_threshold = %d/", threshold)
		if out, err := vm.sh("sed", "-i", expr, "/etc/lvm/lvmlocal.conf"); err != nil {
			t.Fatalf("lvmlocal.conf on %s: %v: %s", node, err, out)
		}
	}
	if on {
		return // the profile's own
	}
	set(100)
	t.Cleanup(func() { set(80) })
}

// poolDataPercent is how full VG e2e's thin pool's data is on node, from
// lvs.
func poolDataPercent(t *testing.T, node string) float64 {
	t.Helper()
	out, err := nodeVM(t, node).sh("lvs", "--noheadings", "-o", "data_percent", "e2e/thinpool")
	if err != nil {
		t.Fatal(err)
	}
	var f float64
	if _, err := fmt.Sscan(strings.TrimSpace(out), &f); err != nil {
		t.Fatalf("data_percent %q: %v", out, err)
	}
	return f
}

// waitThinCapacity waits until the CSIStorageCapacity of carve-thin on
// node satisfies ok (what: its description).
func waitThinCapacity(t *testing.T, node string, ok func(int64) bool, what string) {
	t.Helper()
	wait(t, fmt.Sprintf("CSIStorageCapacity of carve-thin on %s %s", node, what), 4*time.Minute,
		func(ctx context.Context) (bool, error) {
			c, err := storageCapacity(ctx, "carve-thin", node)
			if c == nil || err != nil || c.Capacity == nil {
				return false, err
			}
			return ok(c.Capacity.Value()), nil
		})
}

// waitHealth waits until LogicalVolume pv's status.health has a problem
// of reason (want) or none of it (!want).
func waitHealth(t *testing.T, pv, reason string, want bool) {
	t.Helper()
	what := "LogicalVolume " + pv + " health without " + reason
	if want {
		what = "LogicalVolume " + pv + " health " + reason
	}
	wait(t, what, 3*time.Minute, func(ctx context.Context) (bool, error) {
		var lv v1alpha1.LogicalVolume
		if err := h.kc.Get(ctx, types.NamespacedName{Name: pv}, &lv); err != nil {
			return false, err
		}
		has := false
		for _, p := range lv.Status.Health {
			has = has || p.Reason == reason
		}
		return has == want, nil
	})
}

// waitVGHealth waits until the NodeStorage of node shows VG e2e with a
// health problem of reason (want) or without it (!want).
func waitVGHealth(t *testing.T, node, reason string, want bool) {
	t.Helper()
	what := fmt.Sprintf("NodeStorage %s: VG e2e's health %s %s", node, map[bool]string{true: "has", false: "has no"}[want], reason)
	wait(t, what, 3*time.Minute, func(ctx context.Context) (bool, error) {
		var ns v1alpha1.NodeStorage
		if err := h.kc.Get(ctx, types.NamespacedName{Name: node}, &ns); err != nil {
			return false, err
		}
		for _, vg := range ns.Status.VolumeGroups {
			if vg.Name != "e2e" {
				continue
			}
			has := slices.ContainsFunc(vg.Health, func(p v1alpha1.HealthProblem) bool { return p.Reason == reason })
			return has == want, nil
		}
		return false, nil
	})
}
