//go:build vmtest

package lifecycle

import (
	"bufio"
	"context"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

// TestQueriesAtIdleRunNoLVM: what a CO and kubelet poll (GetCapacity,
// ListVolumes, ControllerGetVolume, ListSnapshots, NodeGetVolumeStats,
// Probe) runs no lvm command once the reports are read, counted by carve's
// own carve_commands_total; and every change Carve makes shows in the very
// next query. Health RPCs, unlike queries, read lvm2 afresh.
func TestQueriesAtIdleRunNoLVM(t *testing.T) {
	metricsAddr := testenv.FreeLoopbackAddr(t)
	e := newEnv(t, []string{testenv.Disk(t, "CARVE_TEST_DISK")}, t.TempDir(), "--health-address="+metricsAddr)
	c := e.c
	ctx := context.Background()
	e.addPool(64 * mib)

	thick := e.create("idle-thick", 32*mib, volParams(false, "ext4"))
	thin := e.create("idle-thin", 32*mib, volParams(true, "ext4"))
	target := e.path("target")
	must(t, thick.Up(ctx, node, e.path("staging"), target))
	t.Cleanup(func() { _ = thick.Down(context.Background(), target) })

	queries := func() (thickFree, thinFree int64, listed int) {
		t.Helper()
		thickFree = e.capacity(volParams(false, "ext4"))
		thinFree = e.capacity(volParams(true, "ext4"))
		vols, err := c.Controller.ListVolumes(ctx, &csi.ListVolumesRequest{})
		must(t, err)
		for _, v := range []*csiflow.Volume{thick, thin} {
			_, err := c.Controller.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: v.ID})
			must(t, err)
		}
		_, err = c.Controller.ListSnapshots(ctx, &csi.ListSnapshotsRequest{})
		must(t, err)
		_, err = c.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: thick.ID, VolumePath: target})
		must(t, err)
		_, err = c.Identity.Probe(ctx, &csi.ProbeRequest{})
		must(t, err)
		return thickFree, thinFree, len(vols.GetEntries())
	}
	thickFree, thinFree, n := queries() // reads the reports the changes above made stale
	before := lvmReads(t, metricsAddr)
	for range 5 {
		if a, b, m := queries(); a != thickFree || b != thinFree || m != n {
			t.Fatalf("idle queries changed: capacity %d/%d, %d volumes; were %d/%d, %d", a, b, m, thickFree, thinFree, n)
		}
	}
	if after := lvmReads(t, metricsAddr); after != before {
		t.Errorf("five rounds of queries at idle ran %d lvm reports, want 0", after-before)
	}
	// Health is no query: a failed disk must show at once.
	before = lvmReads(t, metricsAddr)
	_, err := c.Controller.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{VolumeId: thick.ID})
	must(t, err)
	if lvmReads(t, metricsAddr) == before {
		t.Error("ControllerGetVolumeHealth was answered from a cached report")
	}

	// A change of Carve's shows at once: the next query reads lvm2 again.
	extra := e.create("idle-extra", 64*mib, volParams(false, "ext4"))
	a, _, m := queries()
	if a != thickFree-64*mib || m != n+1 {
		t.Errorf("after a 64 MiB create: capacity %d (was %d), %d volumes (were %d)", a, thickFree, m, n)
	}
	must(t, extra.Delete(ctx))
	if a, _, m := queries(); a != thickFree || m != n {
		t.Errorf("after its delete: capacity %d, want %d; %d volumes, want %d", a, thickFree, m, n)
	}
}

func (e *env) create(name string, size int64, params map[string]string) *csiflow.Volume {
	e.t.Helper()
	v, err := e.c.Create(context.Background(), name, size, params, csiflow.MountCap(snw, "ext4"))
	must(e.t, err)
	return v
}

func (e *env) capacity(params map[string]string) int64 {
	e.t.Helper()
	resp, err := e.c.Controller.GetCapacity(context.Background(), &csi.GetCapacityRequest{Parameters: params})
	must(e.t, err)
	return resp.GetAvailableCapacity()
}

var reportLine = regexp.MustCompile(`^carve_commands_total\{command="(lvs|vgs|pvs)",result="[a-z]+"\} (\d+)`)

// lvmReads sums carve's counts of lvm reports (lvs, vgs, pvs) run.
func lvmReads(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	sum, lines := 0, 0
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if m := reportLine.FindStringSubmatch(sc.Text()); m != nil {
			n, _ := strconv.Atoi(m[2])
			sum += n
			lines++
		}
	}
	if lines == 0 {
		t.Fatal("carve's /metrics shows no lvm report counts: is carve_commands_total wired to the runner?")
	}
	return sum
}
