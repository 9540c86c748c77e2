package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestInterceptorCountsByCode(t *testing.T) {
	// The collectors are process-wide: start from zero so that the counts
	// hold under -count=N too.
	operations.Reset()
	latency.Reset()
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Controller/CreateVolume"}
	ok := func(context.Context, any) (any, error) { return "done", nil }
	full := func(context.Context, any) (any, error) { return nil, status.Error(codes.ResourceExhausted, "full") }
	plain := func(context.Context, any) (any, error) { return nil, errors.New("boom") }
	for _, h := range []grpc.UnaryHandler{ok, ok, full, plain} {
		_, _ = Interceptor(context.Background(), nil, info, h)
	}
	for code, want := range map[string]float64{"OK": 2, "ResourceExhausted": 1, "Unknown": 1} {
		if got := testutil.ToFloat64(operations.WithLabelValues(info.FullMethod, code)); got != want {
			t.Errorf("%s count %v, want %v", code, got, want)
		}
	}
	if n := testutil.CollectAndCount(latency); n != 1 {
		t.Errorf("latency series %d, want 1", n)
	}
}

func TestStorageGauges(t *testing.T) {
	vgBytes.Reset()
	poolPercent.Reset()
	VolumeGroup("n1", "vg0", 100, 40)
	VolumeGroupMetadata("n1", "vg0", 1<<20, 300)
	VolumeGroupMetadata("n1", "vg-unreported", 0, 0)
	ThinPool("n1", "vg0", "pool", 12.5, 3)
	out, err := testutil.GatherAndLint(Registry(), "carve_volume_group_bytes", "carve_thin_pool_used_percent")
	if err != nil || len(out) != 0 {
		t.Errorf("lint: %v %v", out, err)
	}
	if got := testutil.ToFloat64(vgBytes.WithLabelValues("n1", "vg0", "free")); got != 40 {
		t.Errorf("free %v", got)
	}
	if got := testutil.ToFloat64(vgBytes.WithLabelValues("n1", "vg0", "metadata_free")); got != 300 {
		t.Errorf("metadata_free %v", got)
	}
	if n := testutil.CollectAndCount(vgBytes); n != 4 {
		t.Errorf("%d VG series, want 4 (none for an unreported metadata area)", n)
	}
	exp := `
# HELP carve_thin_pool_used_percent Used data and metadata of a thin pool (kind=data|metadata), in percent.
# TYPE carve_thin_pool_used_percent gauge
carve_thin_pool_used_percent{kind="data",node="n1",pool="pool",vg="vg0"} 12.5
carve_thin_pool_used_percent{kind="metadata",node="n1",pool="pool",vg="vg0"} 3
`
	if err := testutil.GatherAndCompare(Registry(), strings.NewReader(exp), "carve_thin_pool_used_percent"); err != nil {
		t.Error(err)
	}
}

func TestCommandsByLVMSubcommand(t *testing.T) {
	commands.Reset()
	commandLatency.Reset()
	Command("lvm", []string{"lvs", "--reportformat", "json"}, time.Millisecond, nil)
	Command("lvm", []string{"lvs"}, time.Millisecond, nil)
	Command("/sbin/mkfs.ext4", []string{"/dev/x"}, time.Second, errors.New("exit 1"))
	Command("lvm", nil, time.Millisecond, nil)
	for _, c := range []struct {
		command, result string
		want            float64
	}{{"lvs", "ok", 2}, {"mkfs.ext4", "failed", 1}, {"lvm", "ok", 1}} {
		if got := testutil.ToFloat64(commands.WithLabelValues(c.command, c.result)); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.command, c.result, got, c.want)
		}
	}
	if out, err := testutil.GatherAndLint(Registry(), "carve_commands_total", "carve_command_duration_seconds"); err != nil || len(out) != 0 {
		t.Errorf("lint: %v %v", out, err)
	}
}

func TestCopiedBytesAndSeconds(t *testing.T) {
	bytes, secs := testutil.ToFloat64(copiedBytes), testutil.ToFloat64(copySeconds)
	Copied(128<<20, 2*time.Second)
	Copied(64<<20, time.Second)
	if got := testutil.ToFloat64(copiedBytes) - bytes; got != 192<<20 {
		t.Errorf("copied bytes +%v, want %v", got, 192<<20)
	}
	if got := testutil.ToFloat64(copySeconds) - secs; got != 3 {
		t.Errorf("copy seconds +%v, want 3", got)
	}
	if out, err := testutil.GatherAndLint(Registry(), "carve_copied_bytes_total", "carve_copy_seconds_total"); err != nil || len(out) != 0 {
		t.Errorf("lint: %v %v", out, err)
	}
}

func TestBackgroundJobs(t *testing.T) {
	backgroundJobs.Reset()
	BackgroundJob("copy", 1)
	BackgroundJob("copy", 1)
	BackgroundJob("wipe", 1)
	BackgroundJob("copy", -1)
	for work, want := range map[string]float64{"copy": 1, "wipe": 1} {
		if got := testutil.ToFloat64(backgroundJobs.WithLabelValues(work)); got != want {
			t.Errorf("%s jobs %v, want %v", work, got, want)
		}
	}
	BackgroundJob("wipe", -1)
	if got := testutil.ToFloat64(backgroundJobs.WithLabelValues("wipe")); got != 0 {
		t.Errorf("wipe jobs %v after the last ended, want 0", got)
	}
	if out, err := testutil.GatherAndLint(Registry(), "carve_background_jobs"); err != nil || len(out) != 0 {
		t.Errorf("lint: %v %v", out, err)
	}
}

// TestClusterMetrics: each scrape reads the cluster afresh; the unfinished
// operations are counted by kind, node and state, with the oldest's age; a
// failed read gives none of the cluster's series, and the rest of the
// scrape is served.
func TestClusterMetrics(t *testing.T) {
	now := time.Unix(10_000, 0)
	cluster.mu.Lock()
	cluster.now = func() time.Time { return now }
	cluster.mu.Unlock()
	t.Cleanup(func() {
		ReadCluster(nil)
		cluster.mu.Lock()
		cluster.now = time.Now
		cluster.mu.Unlock()
	})
	state := ClusterState{
		Reports: map[string]time.Time{"n1": now.Add(-90 * time.Second), "n2": time.UnixMilli(9_000_500)},
		Unfinished: []Unfinished{
			{Kind: "volume", Node: "n1", State: "waiting", Since: now.Add(-time.Minute)},
			{Kind: "volume", Node: "n1", State: "waiting", Since: now.Add(-20 * time.Minute)},
			{Kind: "volume", Node: "n1", State: "failing", Since: now.Add(-5 * time.Second)},
			{Kind: "snapshot", Node: "n2", State: "working", Since: now.Add(time.Second)}, // clocks apart: never negative
		},
	}
	var fail error
	reads := 0
	ReadCluster(func(ctx context.Context) (ClusterState, error) {
		reads++
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the read has no deadline")
		}
		return state, fail
	})
	exp := `
# HELP carve_node_storage_report_timestamp_seconds When a node's agent last wrote its NodeStorage (status.updateTime, Unix seconds): every change, and at least every 10 minutes while it runs. Nodes declared lost are left out.
# TYPE carve_node_storage_report_timestamp_seconds gauge
carve_node_storage_report_timestamp_seconds{node="n1"} 9910
carve_node_storage_report_timestamp_seconds{node="n2"} 9000.5
# HELP carve_unfinished_operation_max_age_seconds Age of the oldest of carve_unfinished_operations of its kind (volume|snapshot|group_snapshot), node and state (waiting|working|failing): since its creation or deletion, since it left Ready (working, failing), or since the controller first saw its change.
# TYPE carve_unfinished_operation_max_age_seconds gauge
carve_unfinished_operation_max_age_seconds{kind="snapshot",node="n2",state="working"} 0
carve_unfinished_operation_max_age_seconds{kind="volume",node="n1",state="failing"} 5
carve_unfinished_operation_max_age_seconds{kind="volume",node="n1",state="waiting"} 1200
# HELP carve_unfinished_operations Volumes, snapshots and group snapshots (kind=volume|snapshot|group_snapshot) whose node agent has work left, by state: waiting (the agent has not reported on the latest change or deletion), working (data work runs: a copy, wipe or raid1 sync) or failing (the last attempt failed; the agent retries).
# TYPE carve_unfinished_operations gauge
carve_unfinished_operations{kind="snapshot",node="n2",state="working"} 1
carve_unfinished_operations{kind="volume",node="n1",state="failing"} 1
carve_unfinished_operations{kind="volume",node="n1",state="waiting"} 2
`
	names := []string{"carve_node_storage_report_timestamp_seconds", "carve_unfinished_operations", "carve_unfinished_operation_max_age_seconds"}
	if err := testutil.GatherAndCompare(Registry(), strings.NewReader(exp), names...); err != nil {
		t.Error(err)
	}
	if out, err := testutil.GatherAndLint(Registry(), names...); err != nil || len(out) != 0 {
		t.Errorf("lint: %v %v", out, err)
	}
	// The work done: its series go.
	state = ClusterState{Reports: map[string]time.Time{"n1": now}}
	if n := testutil.CollectAndCount(cluster, "carve_unfinished_operations"); n != 0 {
		t.Errorf("%d unfinished series once none is left", n)
	}
	fail = errors.New("cache not synced")
	if n := testutil.CollectAndCount(cluster); n != 0 {
		t.Errorf("%d series from a failed read, want none", n)
	}
	if _, err := Registry().Gather(); err != nil {
		t.Errorf("a failed read of the cluster fails the scrape: %v", err)
	}
	if reads < 4 {
		t.Errorf("%d reads: each scrape reads the cluster", reads)
	}
}
