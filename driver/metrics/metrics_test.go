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
