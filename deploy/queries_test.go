package deploy

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// Queries: every metric the rules and the dashboard name, Carve exports

// exported is a metric of docs/metrics.md, which driver/metrics'
// TestMetricsReference keeps equal to what Carve registers.
type exported struct {
	kind   string
	labels []string
	help   string
}

var referenceRow = regexp.MustCompile("^\\| `(carve_[a-z0-9_]+)` \\| ([a-z]+) \\| ([^|]*) \\| (.*) \\|$")

func exportedMetrics(t *testing.T) map[string]exported {
	t.Helper()
	data, err := os.ReadFile(metricsReference)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]exported{}
	for _, line := range strings.Split(string(data), "\n") {
		m := referenceRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		e := exported{kind: m[2], help: strings.ReplaceAll(m[4], `\|`, "|")}
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" {
				e.labels = append(e.labels, l)
			}
		}
		out[m[1]] = e
	}
	if len(out) < 10 {
		t.Fatalf("%s: %d metrics read", metricsReference, len(out))
	}
	return out
}

// scrapeLabels are labels a scrape adds to every series: node from the
// pod's node (the chart's and the example's monitors relabel it).
var scrapeLabels = []string{"node"}

// enumerated are the labels whose values a metric's help lists.
var enumerated = []string{"kind", "state", "work", "result"}

var (
	quotedString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	selector     = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	matcher      = regexp.MustCompile(`([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	labelValues  = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*(\w+)\s*\)`)
	// What is no metric name: ranges and durations, grouping label lists,
	// Grafana's variables, numbers.
	notNames = regexp.MustCompile(`\[[^\]]*\]|\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)|\$\{?\w+\}?|\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b`)
	ident    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	keywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
)

// queryProblems: each metric expr names must be one Carve exports (a
// histogram's _bucket, _sum and _count too), each label a matcher names
// one of the metric's (or a scrape's), each value of an enumerated label
// one its help lists, and expr must name a metric at all.
func queryProblems(expr string, metrics map[string]exported) []string {
	var problems []string
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	resolve := func(name string) (exported, []string, bool) {
		if e, ok := metrics[name]; ok {
			return e, nil, true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if e, ok := metrics[strings.TrimSuffix(name, suffix)]; ok && strings.HasSuffix(name, suffix) && e.kind == "histogram" {
				if suffix == "_bucket" {
					return e, []string{"le"}, true
				}
				return e, nil, true
			}
		}
		return exported{}, nil, false
	}
	checkLabels := func(name string, e exported, extra []string, labels map[string][]string) {
		for l, values := range labels {
			if !slices.Contains(e.labels, l) && !slices.Contains(extra, l) && !slices.Contains(scrapeLabels, l) {
				errorf("%s has no label %s (%v)", name, l, e.labels)
				continue
			}
			if !slices.Contains(enumerated, l) {
				continue
			}
			for _, v := range values {
				for _, alt := range strings.Split(v, "|") {
					if !regexp.MustCompile(`\b` + regexp.QuoteMeta(alt) + `\b`).MatchString(e.help) {
						errorf("%s{%s=%q}: %q is not one of its values (%s)", name, l, v, alt, metricsReference)
					}
				}
			}
		}
	}
	names := 0
	for _, m := range labelValues.FindAllStringSubmatch(expr, -1) {
		names++
		if e, extra, ok := resolve(m[1]); !ok {
			errorf("%s is not a metric Carve exports (%s)", m[1], metricsReference)
		} else {
			checkLabels(m[1], e, extra, map[string][]string{m[2]: nil})
		}
	}
	rest := labelValues.ReplaceAllString(expr, "")
	for _, m := range selector.FindAllStringSubmatch(rest, -1) {
		labels := map[string][]string{}
		for _, mm := range matcher.FindAllStringSubmatch(m[2], -1) {
			labels[mm[1]] = append(labels[mm[1]], mm[3])
		}
		if e, extra, ok := resolve(m[1]); ok {
			checkLabels(m[1], e, extra, labels)
		}
	}
	rest = quotedString.ReplaceAllString(rest, `""`)
	rest = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(rest, "")
	rest = notNames.ReplaceAllString(rest, " ")
	for _, loc := range ident.FindAllStringIndex(rest, -1) {
		name := rest[loc[0]:loc[1]]
		if slices.Contains(keywords, name) || strings.HasPrefix(strings.TrimSpace(rest[loc[1]:]), "(") {
			continue // a function, an aggregation or a keyword
		}
		names++
		if _, _, ok := resolve(name); !ok {
			errorf("%s is not a metric Carve exports (%s)", name, metricsReference)
		}
	}
	if names == 0 {
		errorf("no metric")
	}
	return problems
}

// checkQuery reports queryProblems of expr, from where.
func checkQuery(t *testing.T, where, expr string, metrics map[string]exported) {
	t.Helper()
	for _, p := range queryProblems(expr, metrics) {
		t.Errorf("%s: %s: %q", where, p, expr)
	}
}

// TestQueriesNameCarveMetrics: the alerts' and the dashboard's queries
// name only metrics Carve exports, with their labels.
func TestQueriesNameCarveMetrics(t *testing.T) {
	metrics := exportedMetrics(t)
	f := readRules(t)
	for _, r := range f.alerts() {
		checkQuery(t, "alert "+r.Alert, r.Expr, metrics)
	}
	d := carveDashboard()
	queries := 0
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			checkQuery(t, fmt.Sprintf("panel %q", p.Title), q.Expr, metrics)
			queries++
		}
	}
	for _, v := range d.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			checkQuery(t, "variable "+v.Name, q["query"].(string), metrics)
			queries++
		}
	}
	t.Logf("%d alerts and %d dashboard queries checked against %d metrics", len(f.alerts()), queries, len(metrics))
}

// TestQueryCheckCatches: the check above refuses a metric Carve does not
// export, a label it does not carry and a value its help does not list.
func TestQueryCheckCatches(t *testing.T) {
	metrics := exportedMetrics(t)
	for _, expr := range []string{
		`sum(rate(carve_csi_operation_total[5m]))`,
		`max by (node) (carve_volume_group_bytes{kind="free"}) / carve_volume_groups_bytes`,
		`carve_thin_pool_used_percent{kind="date"} > 80`,
		`carve_unmatched_volumes{type="orphaned"}`,
		`histogram_quantile(0.9, rate(carve_commands_total_bucket[5m]))`,
		`label_values(carve_volume_group_bytes, pool)`,
		`time()`,
	} {
		if len(queryProblems(expr, metrics)) == 0 {
			t.Errorf("%q passes the check", expr)
		}
	}
}
