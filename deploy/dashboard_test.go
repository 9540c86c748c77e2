package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// The Grafana dashboard (monitoring/carve-dashboard.json) is written from
// the code below: TestDashboard fails when the file differs, and
// CARVE_UPDATE_DOCS=1 rewrites it (and its copies: TestMonitoringCopies).
// TestQueriesNameCarveMetrics holds its queries to the metrics Carve
// exports.
const dashboardFile = "monitoring/carve-dashboard.json"

// The dashboard's JSON model: the fields Grafana reads, in a fixed order.
type dashboard struct {
	UID           string     `json:"uid"`
	Title         string     `json:"title"`
	Description   string     `json:"description"`
	Tags          []string   `json:"tags"`
	Editable      bool       `json:"editable"`
	GraphTooltip  int        `json:"graphTooltip"`
	Refresh       string     `json:"refresh"`
	SchemaVersion int        `json:"schemaVersion"`
	Time          timeRange  `json:"time"`
	Templating    templating `json:"templating"`
	Panels        []panel    `json:"panels"`
}

type timeRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

type templating struct {
	List []variable `json:"list"`
}

type variable struct {
	Name       string     `json:"name"`
	Label      string     `json:"label"`
	Type       string     `json:"type"`
	Query      any        `json:"query"`
	Datasource *reference `json:"datasource,omitempty"`
	Refresh    int        `json:"refresh,omitempty"`
	Multi      bool       `json:"multi,omitempty"`
	IncludeAll bool       `json:"includeAll,omitempty"`
	AllValue   string     `json:"allValue,omitempty"`
	Sort       int        `json:"sort,omitempty"`
}

// reference names the data source: the dashboard's variable.
type reference struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

var prometheus = &reference{Type: "prometheus", UID: "${datasource}"}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Datasource  *reference     `json:"datasource,omitempty"`
	Description string         `json:"description,omitempty"`
	GridPos     gridPos        `json:"gridPos"`
	Targets     []target       `json:"targets,omitempty"`
	FieldConfig map[string]any `json:"fieldConfig,omitempty"`
	Options     map[string]any `json:"options,omitempty"`
	Collapsed   *bool          `json:"collapsed,omitempty"`
}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

type target struct {
	RefID        string     `json:"refId"`
	Datasource   *reference `json:"datasource"`
	Expr         string     `json:"expr"`
	LegendFormat string     `json:"legendFormat"`
	Instant      bool       `json:"instant,omitempty"`
	Range        bool       `json:"range"`
}

// query is a panel's query: expr, its legend, instant or over time.
type query struct {
	expr, legend string
}

// chart is a panel to lay out: a time series unless kind says otherwise.
type chart struct {
	kind, title, about, unit string
	queries                  []query
	// warn, when set, is where the panel turns red (the alert's
	// threshold); maxOne caps the axis at 1 (a fraction).
	warn   *float64
	maxOne bool
}

// row is a titled row of charts, two to a line.
type row struct {
	title  string
	charts []chart
}

func num(v float64) *float64 { return &v }

// sel is a selector of metric name restricted to the dashboard's nodes,
// with further matchers.
func sel(name, matchers string) string {
	if matchers != "" {
		matchers = ", " + matchers
	}
	return name + `{node=~"$node"` + matchers + "}"
}

// carveDashboard: capacity per node and VG, the operations' rates and
// latencies, the agents' unfinished work, copies in flight, the nodes'
// reports.
func carveDashboard() dashboard {
	vgFraction := func(part string) string {
		return "max by (node, vg) (" + sel("carve_volume_group_bytes", `kind="`+part+`_free"`) + ")\n  / max by (node, vg) (" +
			sel("carve_volume_group_bytes", `kind="`+part+`_size"`) + ")"
	}
	used := "1 - max by (node, vg) (" + sel("carve_volume_group_bytes", `kind="free"`) + ")\n  / max by (node, vg) (" +
		sel("carve_volume_group_bytes", `kind="size"`) + ")"
	quantile := func(q, metric, by, matchers string) string {
		return "histogram_quantile(" + q + ", sum by (" + by + ", le) (rate(" + metric + "_bucket" + matchers + "[$__rate_interval])))"
	}
	rows := []row{
		{"Capacity", []chart{
			{kind: "bargauge", title: "Volume groups used, now", unit: "percentunit", maxOne: true, warn: num(0.9),
				about:   "Each volume group's used share on each node (CarveVolumeGroupNearlyFull: under 10 % free).",
				queries: []query{{used, "{{node}} {{vg}}"}}},
			{title: "Volume groups used", unit: "percentunit", maxOne: true, warn: num(0.9),
				queries: []query{{used, "{{node}} {{vg}}"}}},
			{title: "Volume groups free", unit: "bytes",
				queries: []query{{"max by (node, vg) (" + sel("carve_volume_group_bytes", `kind="free"`) + ")", "{{node}} {{vg}}"}}},
			{title: "Thin pools used", unit: "percent", warn: num(80),
				about:   "Data and metadata of each thin pool (CarveThinPoolNearlyFull at 80 %, CarveThinPoolFull at 95 %).",
				queries: []query{{"max by (node, vg, pool, kind) (" + sel("carve_thin_pool_used_percent", "") + ")", "{{node}} {{vg}}/{{pool}} {{kind}}"}}},
			{title: "Volume group metadata areas free", unit: "percentunit", maxOne: true,
				about:   "With under 16 KiB free a node takes no new volume (CarveVolumeGroupMetadataNearlyFull: under 25 %).",
				queries: []query{{vgFraction("metadata"), "{{node}} {{vg}}"}}},
		}},
		{"Operations", []chart{
			{title: "CSI calls", unit: "reqps",
				queries: []query{{"sum by (method) (rate(carve_csi_operations_total[$__rate_interval]))", "{{method}}"}}},
			{title: "CSI calls not OK", unit: "reqps",
				about:   "Aborted is a call answered while the work goes on (the caller retries); ResourceExhausted, no room on the node.",
				queries: []query{{`sum by (method, code) (rate(carve_csi_operations_total{code!="OK"}[$__rate_interval]))`, "{{method}} {{code}}"}}},
			{title: "CSI call latency", unit: "s",
				queries: []query{
					{quantile("0.99", "carve_csi_operation_duration_seconds", "method", ""), "p99 {{method}}"},
					{quantile("0.5", "carve_csi_operation_duration_seconds", "method", ""), "p50 {{method}}"},
				}},
			{title: "Unfinished operations", unit: "short",
				about:   "Volumes and snapshots whose node agent has work left: waiting for the agent, working (data work), failing (retried).",
				queries: []query{{"sum by (kind, state) (max by (kind, node, state) (" + sel("carve_unfinished_operations", "") + "))", "{{kind}} {{state}}"}}},
			{title: "Oldest unfinished operation", unit: "s", warn: num(900),
				about:   "CarveOperationStuck: waiting over 15 min; CarveOperationFailing: failing over 10 min.",
				queries: []query{{"max by (kind, node, state) (" + sel("carve_unfinished_operation_max_age_seconds", "") + ")", "{{kind}} {{node}} {{state}}"}}},
			{title: "Commands", unit: "reqps",
				about:   "lvm2's (by subcommand) and the other commands the nodes run.",
				queries: []query{{"sum by (command, result) (rate(" + sel("carve_commands_total", "") + "[$__rate_interval]))", "{{command}} {{result}}"}}},
			{title: "Command latency, p99", unit: "s",
				queries: []query{{quantile("0.99", "carve_command_duration_seconds", "command", `{node=~"$node"}`), "{{command}}"}}},
		}},
		{"Data work", []chart{
			{title: "Copies and wipes in flight", unit: "short",
				about:   "Copies into thick snapshots, clones and restores, and wipes of deleted LVs, running in the background.",
				queries: []query{{"sum by (node, work) (" + sel("carve_background_jobs", "") + ")", "{{node}} {{work}}"}}},
			{title: "Copy throughput", unit: "Bps",
				about:   "Bytes copied between LVs, counted when each copy ends.",
				queries: []query{{"sum by (node) (rate(" + sel("carve_copied_bytes_total", "") + "[$__rate_interval]))", "{{node}}"}}},
		}},
		{"Nodes", []chart{
			{title: "Since each node's last report", unit: "s", warn: num(900),
				about:   "A running node agent reports at least every 10 minutes (CarveNodeNotReporting: over 15 min).",
				queries: []query{{"time() - max by (node) (" + sel("carve_node_storage_report_timestamp_seconds", "") + ")", "{{node}}"}}},
			{title: "Orphaned and missing volumes", unit: "short", warn: num(1),
				queries: []query{{"max by (node, kind) (" + sel("carve_unmatched_volumes", "") + ")", "{{node}} {{kind}}"}}},
			{title: "Resources on nodes declared lost", unit: "short",
				queries: []query{{"max by (node, kind) (" + sel("carve_lost_node_resources", "") + ")", "{{node}} {{kind}}"}}},
		}},
	}
	return dashboard{
		UID:   "carve",
		Title: "Carve",
		Description: "Carve's volume groups and thin pools per node, its CSI calls and commands, the node agents' unfinished work, " +
			"copies in flight and the nodes' reports (deploy/README.md, Monitoring).",
		Tags: []string{"carve", "csi", "storage"}, Editable: true, GraphTooltip: 1, Refresh: "1m", SchemaVersion: 39,
		Time: timeRange{From: "now-6h", To: "now"},
		Templating: templating{List: []variable{
			{Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus"},
			{Name: "node", Label: "Node", Type: "query", Datasource: prometheus, Refresh: 2, Multi: true, IncludeAll: true, AllValue: ".*", Sort: 1,
				Query: map[string]any{"query": "label_values(carve_volume_group_bytes, node)", "refId": "node"}},
		}},
		Panels: layout(rows),
	}
}

// layout places the rows one under the other, each chart half the width.
func layout(rows []row) []panel {
	var out []panel
	id, y := 1, 0
	for _, r := range rows {
		out = append(out, panel{ID: id, Type: "row", Title: r.title, GridPos: gridPos{H: 1, W: 24, X: 0, Y: y}, Collapsed: new(bool)})
		id, y = id+1, y+1
		for i, c := range r.charts {
			defaults := map[string]any{"unit": c.unit}
			if c.maxOne {
				defaults["min"], defaults["max"] = 0, 1
			}
			if c.warn != nil {
				defaults["thresholds"] = map[string]any{"mode": "absolute",
					"steps": []map[string]any{{"color": "green", "value": nil}, {"color": "red", "value": *c.warn}}}
			}
			p := panel{ID: id, Type: "timeseries", Title: c.title, Description: c.about, Datasource: prometheus,
				GridPos:     gridPos{H: 8, W: 12, X: 12 * (i % 2), Y: y + 8*(i/2)},
				FieldConfig: map[string]any{"defaults": defaults, "overrides": []any{}}}
			if c.kind != "" {
				p.Type = c.kind
				p.Options = map[string]any{"orientation": "horizontal", "displayMode": "gradient",
					"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false}}
			}
			for j, q := range c.queries {
				p.Targets = append(p.Targets, target{RefID: string(rune('A' + j)), Datasource: prometheus, Expr: q.expr,
					LegendFormat: q.legend, Instant: c.kind == "bargauge", Range: c.kind != "bargauge"})
			}
			out = append(out, p)
			id++
		}
		y += 8 * ((len(r.charts) + 1) / 2)
	}
	return out
}

// renderDashboard is the dashboard's file: indented JSON, a final newline.
func renderDashboard(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(carveDashboard()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestDashboard: monitoring/carve-dashboard.json is what carveDashboard
// writes; CARVE_UPDATE_DOCS=1 rewrites it.
func TestDashboard(t *testing.T) {
	want := renderDashboard(t)
	if os.Getenv("CARVE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(dashboardFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(dashboardFile)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s is not what carveDashboard writes (%v): rewrite it with CARVE_UPDATE_DOCS=1 go test ./deploy -run 'TestDashboard|TestMonitoringCopies'", dashboardFile, err)
	}
	// Every panel has a unique id and queries, and none overlaps another.
	seen := map[int]bool{}
	taken := map[[2]int]int{}
	for _, p := range carveDashboard().Panels {
		if seen[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		seen[p.ID] = true
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		overlaps := map[int]bool{}
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if other, ok := taken[[2]int{x, y}]; ok && !overlaps[other] {
					overlaps[other] = true
					t.Errorf("panels %d and %d overlap", other, p.ID)
				}
				taken[[2]int{x, y}] = p.ID
			}
		}
	}
}
