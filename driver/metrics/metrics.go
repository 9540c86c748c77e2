// Package metrics holds Carve's Prometheus metrics: every CSI call (count
// by method and result code, latency) and, on nodes, the space of each
// volume group and thin pool. They live in controller-runtime's registry,
// which the cluster binaries serve on --metrics-address; standalone serves
// the same registry next to /healthz.
package metrics

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	operations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "carve_csi_operations_total",
		Help: "CSI calls served, by method and gRPC result code.",
	}, []string{"method", "code"})
	latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "carve_csi_operation_duration_seconds",
		Help:    "Duration of CSI calls, by method.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"method"})
	vgBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "carve_volume_group_bytes",
		Help: "Size and free space of a served volume group (kind=size|free), and of its metadata area (kind=metadata_size|metadata_free: with under 16 KiB free the node takes no new volume).",
	}, []string{"node", "vg", "kind"})
	commands = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "carve_commands_total",
		Help: "External commands run, by command (lvm's subcommand for lvm: lvs, lvcreate...) and result (ok|failed).",
	}, []string{"command", "result"})
	commandLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "carve_command_duration_seconds",
		Help:    "Duration of external commands, by command.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"command"})
	poolPercent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "carve_thin_pool_used_percent",
		Help: "Used data and metadata of a thin pool (kind=data|metadata), in percent.",
	}, []string{"node", "vg", "pool", "kind"})
	unmatched = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "carve_unmatched_volumes",
		Help: "A node's volumes with no counterpart, by kind: orphaned (Carve's LV, no LogicalVolume) or missing (a carved LogicalVolume, no LV).",
	}, []string{"node", "kind"})
	copiedBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "carve_copied_bytes_total",
		Help: "Bytes a node copied between LVs (thick snapshots, clones, restores of thick snapshots); with carve_copy_seconds_total, the copies' throughput.",
	})
	copySeconds = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "carve_copy_seconds_total",
		Help: "Time a node spent copying between LVs: the copy loop alone, not the lvm2 commands around it.",
	})
	lostNode = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "carve_lost_node_resources",
		Help: "Resources still on a node declared lost, by kind (volume|snapshot): their data is on that node only.",
	}, []string{"node", "kind"})
	backgroundJobs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "carve_background_jobs",
		Help: "Data work a node runs in the background now, by work: copy (into a thick snapshot, a clone, a restore) or wipe (of a deleted LV).",
	}, []string{"work"})
)

// collectors are all of Carve's metrics: registered once, and listed in
// docs/metrics.md (reference_test.go writes it from them).
var collectors = []prometheus.Collector{operations, latency, commands, commandLatency, vgBytes, poolPercent, unmatched, lostNode,
	copiedBytes, copySeconds, backgroundJobs, cluster}

func init() {
	ctrlmetrics.Registry.MustRegister(collectors...)
}

// Registry is where Carve's metrics are registered.
func Registry() prometheus.Gatherer { return ctrlmetrics.Registry }

// Interceptor counts and times every CSI call; it sits outside the error
// mapping, so it sees the code the CO gets.
func Interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	operations.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	latency.WithLabelValues(info.FullMethod).Observe(time.Since(start).Seconds())
	return resp, err
}

// StreamInterceptor counts and times streaming calls as Interceptor does
// unary ones; a stream's time is until its last message is sent.
func StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	operations.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
	latency.WithLabelValues(info.FullMethod).Observe(time.Since(start).Seconds())
	return err
}

// Command counts and times one external command (runner.Exec.Observe).
// lvm2's commands are told apart by subcommand: an idle node's count of
// "lvs" is what shows whether anything polls LVM.
func Command(name string, args []string, d time.Duration, err error) {
	label := filepath.Base(name)
	if label == "lvm" && len(args) > 0 {
		label = args[0]
	}
	result := "ok"
	if err != nil {
		result = "failed"
	}
	commands.WithLabelValues(label, result).Inc()
	commandLatency.WithLabelValues(label).Observe(d.Seconds())
}

// Copied records a copy between LVs that finished: n bytes in d.
func Copied(n int64, d time.Duration) {
	copiedBytes.Add(float64(n))
	copySeconds.Add(d.Seconds())
}

// BackgroundJob counts a background job of work ("copy" or "wipe") that
// starts (+1) or ends (-1).
func BackgroundJob(work string, delta int) {
	backgroundJobs.WithLabelValues(work).Add(float64(delta))
}

// VolumeGroup records a VG's size and free bytes.
func VolumeGroup(node, vg string, size, free uint64) {
	vgBytes.WithLabelValues(node, vg, "size").Set(float64(size))
	vgBytes.WithLabelValues(node, vg, "free").Set(float64(free))
}

// VolumeGroupMetadata records a VG's metadata area and what is left of it
// (lvm.VG); nothing for an area not reported (size 0).
func VolumeGroupMetadata(node, vg string, size, free uint64) {
	if size == 0 {
		return
	}
	vgBytes.WithLabelValues(node, vg, "metadata_size").Set(float64(size))
	vgBytes.WithLabelValues(node, vg, "metadata_free").Set(float64(free))
}

// ThinPool records a thin pool's data and metadata use.
func ThinPool(node, vg, pool string, dataPercent, metadataPercent float64) {
	poolPercent.WithLabelValues(node, vg, pool, "data").Set(dataPercent)
	poolPercent.WithLabelValues(node, vg, pool, "metadata").Set(metadataPercent)
}

// UnmatchedVolumes records a node's audit: its orphaned and missing volumes.
func UnmatchedVolumes(node string, orphaned, missing int) {
	unmatched.WithLabelValues(node, "orphaned").Set(float64(orphaned))
	unmatched.WithLabelValues(node, "missing").Set(float64(missing))
}

// LostNode records how many volumes and snapshots remain on a node declared
// lost; a node no longer lost is dropped.
func LostNode(node string, lost bool, volumes, snapshots int) {
	if !lost {
		lostNode.DeleteLabelValues(node, "volume")
		lostNode.DeleteLabelValues(node, "snapshot")
		return
	}
	lostNode.WithLabelValues(node, "volume").Set(float64(volumes))
	lostNode.WithLabelValues(node, "snapshot").Set(float64(snapshots))
}

// The cluster's metrics: what carve controller reads of its resources at
// each scrape (ReadCluster), from its informer cache.
var (
	reportTime = prometheus.NewDesc("carve_node_storage_report_timestamp_seconds",
		"When a node's agent last wrote its NodeStorage (status.updateTime, Unix seconds): every change, and at least every 10 minutes while it runs. Nodes declared lost are left out.",
		[]string{"node"}, nil)
	unfinishedCount = prometheus.NewDesc("carve_unfinished_operations",
		"Volumes, snapshots and group snapshots (kind=volume|snapshot|group_snapshot) whose node agent has work left, by state: waiting (the agent has not reported on the latest change or deletion), working (data work runs: a copy, wipe or raid1 sync) or failing (the last attempt failed; the agent retries).",
		[]string{"kind", "node", "state"}, nil)
	unfinishedAge = prometheus.NewDesc("carve_unfinished_operation_max_age_seconds",
		"Age of the oldest of carve_unfinished_operations of its kind (volume|snapshot|group_snapshot), node and state (waiting|working|failing): since its creation or deletion, since it left Ready (working, failing), or since the controller first saw its change.",
		[]string{"kind", "node", "state"}, nil)
)

// ClusterState is what carve controller reads of the cluster for its
// metrics.
type ClusterState struct {
	// Reports: when each node's agent last reported (NodeStorage).
	Reports map[string]time.Time
	// Unfinished: the resources whose agent has work left.
	Unfinished []Unfinished
}

// Unfinished is one resource whose node agent has work left.
type Unfinished struct {
	Kind  string // volume, snapshot or group_snapshot
	Node  string
	State string // waiting, working or failing
	// Since is when the work was asked for or began: the resource's
	// creation or deletion, when it left Ready, or when the controller
	// first saw its change.
	Since time.Time
}

// clusterCollector reads the cluster at each scrape, once read is set.
type clusterCollector struct {
	mu   sync.Mutex
	read func(context.Context) (ClusterState, error)
	now  func() time.Time
}

var cluster = &clusterCollector{now: time.Now}

// ReadCluster makes the cluster's metrics come from read, called at each
// scrape (carve controller's, from its cache); nil turns them off.
func ReadCluster(read func(context.Context) (ClusterState, error)) {
	cluster.mu.Lock()
	defer cluster.mu.Unlock()
	cluster.read = read
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- reportTime
	ch <- unfinishedCount
	ch <- unfinishedAge
}

// scrapeTimeout bounds a scrape's read of the cluster (a cache not synced
// yet waits for its sync).
const scrapeTimeout = 10 * time.Second

// Collect reads the cluster; a failed read is logged and gives no series,
// so that the scrape still serves every other metric.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	read, now := c.read, c.now
	c.mu.Unlock()
	if read == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	st, err := read(ctx)
	if err != nil {
		klog.ErrorS(err, "Reading the cluster's resources for the metrics failed")
		return
	}
	for node, at := range st.Reports {
		ch <- prometheus.MustNewConstMetric(reportTime, prometheus.GaugeValue, float64(at.UnixMilli())/1e3, node)
	}
	type key struct{ kind, node, state string }
	count, oldest := map[key]int{}, map[key]time.Time{}
	for _, u := range st.Unfinished {
		k := key{u.Kind, u.Node, u.State}
		count[k]++
		if o, ok := oldest[k]; !ok || u.Since.Before(o) {
			oldest[k] = u.Since
		}
	}
	t := now()
	for k, n := range count {
		ch <- prometheus.MustNewConstMetric(unfinishedCount, prometheus.GaugeValue, float64(n), k.kind, k.node, k.state)
		ch <- prometheus.MustNewConstMetric(unfinishedAge, prometheus.GaugeValue, max(t.Sub(oldest[k]).Seconds(), 0), k.kind, k.node, k.state)
	}
}
