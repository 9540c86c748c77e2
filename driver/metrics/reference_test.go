package metrics

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
)

// reference is the metrics reference page, written from the collectors.
const reference = "../../docs/metrics.md"

// recordEveryMetric gives each collector a series through the functions
// the rest of Carve calls, so that each shows up in a Gather with its
// labels. A new metric needs its recorder called here
// (TestMetricsReference says so).
func recordEveryMetric() {
	ok := func(context.Context, any) (any, error) { return nil, nil }
	_, _ = Interceptor(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodeStageVolume"}, ok)
	Command("lvm", []string{"lvs"}, time.Millisecond, errors.New("x"))
	Copied(1, time.Second)
	VolumeGroup("n", "vg", 2, 1)
	ThinPool("n", "vg", "pool", 1, 1)
	UnmatchedVolumes("n", 0, 0)
	LostNode("n", true, 1, 0)
	BackgroundJob("copy", 1)
	BackgroundJob("copy", -1)
	ReadCluster(func(context.Context) (ClusterState, error) {
		return ClusterState{Reports: map[string]time.Time{"n": time.Unix(1, 0)},
			Unfinished: []Unfinished{{Kind: "volume", Node: "n", State: "waiting", Since: time.Unix(1, 0)}}}, nil
	})
}

// TestMetricsReference: docs/metrics.md lists every metric Carve exports,
// with its type, labels and help, as the code defines them.
// CARVE_UPDATE_DOCS=1 rewrites the page.
func TestMetricsReference(t *testing.T) {
	recordEveryMetric()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if n := described(); len(fams) != n {
		t.Fatalf("%d of %d metrics have a series: call the new metric's recorder in recordEveryMetric", len(fams), n)
	}
	want := renderReference(fams)
	if os.Getenv("CARVE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(reference, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(reference)
	if err != nil || string(got) != want {
		t.Fatalf("%s is not what the metrics define (%v): rewrite it with CARVE_UPDATE_DOCS=1 go test ./driver/metrics -run TestMetricsReference", reference, err)
	}
}

// described counts the metrics the collectors describe (a collector may
// describe several).
func described() int {
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	n := 0
	for range ch {
		n++
	}
	return n
}

// renderReference writes the page: one row per metric, by name.
func renderReference(fams []*dto.MetricFamily) string {
	var b strings.Builder
	b.WriteString("# Metrics reference\n\n" +
		"Written from the code by `CARVE_UPDATE_DOCS=1 go test ./driver/metrics -run TestMetricsReference`;\n" +
		"the test fails when this page and the code differ. `carve controller` and\n" +
		"`carve node` serve them on `--metrics-address` (controller-runtime's\n" +
		"registry, beside its own workqueue and client metrics), `carve\n" +
		"standalone` next to `/healthz`. Which process exports which: the CSI\n" +
		"calls' every process that serves CSI; the commands' and the copies'\n" +
		"the processes that run lvm2 (carve node, carve standalone); the volume\n" +
		"groups', thin pools' and unmatched volumes' carve node's agent (in\n" +
		"NodeStorage too); the background jobs' the processes that run lvm2;\n" +
		"the lost nodes' carve controller's leader; the node reports' and the\n" +
		"unfinished operations' every carve controller replica, read from its\n" +
		"cache at each scrape. deploy/README.md, Monitoring, has the alerts and\n" +
		"the dashboard built on them.\n\n" +
		"| metric | type | labels | meaning |\n|---|---|---|---|\n")
	slices.SortFunc(fams, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	for _, f := range fams {
		var labels []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, "`"+l.GetName()+"`")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.GetName(), strings.ToLower(f.GetType().String()),
			strings.Join(labels, ", "), strings.ReplaceAll(f.GetHelp(), "|", `\|`))
	}
	return b.String()
}
