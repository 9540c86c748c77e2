package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The monitoring objects of the kustomize example
// (kubernetes/examples/monitoring) and the Helm chart (metrics.*), and
// their copies of the rules and the dashboard.
const monitoringDir = "kubernetes/examples/monitoring"

// monitoringCopies: each copy of the rules and the dashboard, by path,
// with what it must hold.
func monitoringCopies(t *testing.T) map[string][]byte {
	t.Helper()
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	dash := renderDashboard(t)
	return map[string][]byte{
		"helm/carve/files/carve-rules.yaml":           rules,
		"helm/carve/files/carve-dashboard.json":       dash,
		monitoringDir + "/rules/carve-dashboard.json": dash,
		monitoringDir + "/rules/prometheusrule.yaml":  prometheusRule(t, rules),
	}
}

// prometheusRule is the rule file as the Prometheus Operator's resource:
// its groups (the file from its first line on, "groups:") as the spec.
func prometheusRule(t *testing.T, rules []byte) []byte {
	t.Helper()
	_, groups, ok := strings.Cut(string(rules), "\ngroups:\n")
	if !ok {
		t.Fatalf("%s has no line groups:", rulesFile)
	}
	var b strings.Builder
	b.WriteString("# Written from deploy/" + rulesFile + " by go test ./deploy: edit that\n" +
		"# file, then CARVE_UPDATE_DOCS=1 go test ./deploy -run TestMonitoringCopies.\n" +
		"apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n  name: carve\n" +
		"  labels:\n    app.kubernetes.io/name: carve\nspec:\n  groups:\n")
	for _, line := range strings.SplitAfter(groups, "\n") {
		if strings.TrimSpace(line) != "" {
			b.WriteString("  ")
		}
		b.WriteString(line)
	}
	return []byte(b.String())
}

// TestMonitoringCopies: the chart's files and the kustomize example hold
// the rules and the dashboard as written; CARVE_UPDATE_DOCS=1 rewrites
// them.
func TestMonitoringCopies(t *testing.T) {
	for path, want := range monitoringCopies(t) {
		if os.Getenv("CARVE_UPDATE_DOCS") == "1" {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s (%v): rewrite it with CARVE_UPDATE_DOCS=1 go test ./deploy -run TestMonitoringCopies",
				path, map[bool]string{true: dashboardFile, false: rulesFile}[strings.HasSuffix(path, ".json")], err)
		}
	}
}

// ---------------------------------------------------------------------------
// The monitoring objects: the kustomize example's and the chart's

// monitor is a ServiceMonitor or PodMonitor (Prometheus Operator,
// monitoring.coreos.com/v1), the fields Carve's use: the operator's types
// are not a dependency of Carve.
type monitor struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       struct {
		Selector            labelSelector `json:"selector"`
		Endpoints           []endpoint    `json:"endpoints,omitempty"`
		PodMetricsEndpoints []endpoint    `json:"podMetricsEndpoints,omitempty"`
	} `json:"spec"`
}

type labelSelector struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchExpressions []struct {
		Key      string   `json:"key"`
		Operator string   `json:"operator"`
		Values   []string `json:"values"`
	} `json:"matchExpressions,omitempty"`
}

// matches: the selector selects labels (the operators Carve's use: In).
func (s labelSelector) matches(labels map[string]string) bool {
	for k, v := range s.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	for _, e := range s.MatchExpressions {
		if e.Operator != "In" || !slices.Contains(e.Values, labels[e.Key]) {
			return false
		}
	}
	return len(s.MatchLabels)+len(s.MatchExpressions) > 0
}

type endpoint struct {
	Port        string `json:"port"`
	Interval    string `json:"interval"`
	HonorLabels bool   `json:"honorLabels"`
	Relabelings []struct {
		SourceLabels []string `json:"sourceLabels"`
		TargetLabel  string   `json:"targetLabel"`
	} `json:"relabelings"`
}

type prometheusRuleObject struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       any            `json:"spec"`
}

// checkMonitoring checks the monitoring objects of objs against the pods
// of workloads (the Deployment and DaemonSet they are about): each metrics
// Service selects one component's pods and targets its carve container's
// port named metrics; each monitor selects both components (through the
// Services, or their pods) on that port, honours the metrics' own labels
// and gives every series its pod's node; the PrometheusRule holds the
// rule file's groups; the dashboard's ConfigMap holds the dashboard, for
// Grafana's sidecar. It returns the kinds it found.
func checkMonitoring(t *testing.T, objs, workloads []object) map[string]int {
	t.Helper()
	type pods struct {
		labels map[string]string
		port   int32 // the carve container's port named metrics
	}
	components := map[string]pods{}
	for _, o := range workloads {
		spec, ok := podSpec(t, o)
		if !ok {
			continue
		}
		var meta struct {
			Spec struct {
				Template struct {
					Metadata struct {
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(o.raw, &meta); err != nil {
			t.Fatal(err)
		}
		p := pods{labels: meta.Spec.Template.Metadata.Labels}
		if c := container(spec, "carve"); c != nil {
			for _, port := range c.Ports {
				if port.Name == "metrics" {
					p.port = port.ContainerPort
				}
			}
		}
		components[o.Name] = p
	}
	if _, ok := components[controller]; !ok || len(components) != 2 {
		t.Fatalf("the pods of %s and %s, to check the monitoring against: %+v", controller, node, components)
	}
	found := map[string]int{}
	var services []corev1.Service
	for _, o := range objs {
		found[o.Kind]++
		switch o.Kind {
		case "Service":
			var s corev1.Service
			strict(t, o, &s)
			services = append(services, s)
			var selected []string
			for name, p := range components {
				if (labelSelector{MatchLabels: s.Spec.Selector}).matches(p.labels) {
					selected = append(selected, name)
				}
			}
			if len(selected) != 1 || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Name != "metrics" || components[selected[0]].port == 0 ||
				s.Spec.Ports[0].TargetPort.String() != "metrics" || s.Spec.Ports[0].Port != components[selected[0]].port {
				t.Errorf("%v: selects %v, ports %+v; want one component's pods, its port named metrics", o, selected, s.Spec.Ports)
			}
		case "ServiceMonitor", "PodMonitor":
			var m monitor
			strict(t, o, &m)
			eps := m.Spec.Endpoints
			for name, p := range components {
				if p.port == 0 {
					t.Errorf("%v scrapes %s, whose carve container has no port named metrics", o, name)
				}
				if o.Kind == "PodMonitor" && !m.Spec.Selector.matches(p.labels) {
					t.Errorf("%v does not select %s's pods", o, name)
				}
			}
			if o.Kind == "PodMonitor" {
				eps = m.Spec.PodMetricsEndpoints
			}
			if len(eps) != 1 || eps[0].Port != "metrics" || !eps[0].HonorLabels || len(eps[0].Relabelings) != 1 ||
				eps[0].Relabelings[0].TargetLabel != "node" ||
				!slices.Equal(eps[0].Relabelings[0].SourceLabels, []string{"__meta_kubernetes_pod_node_name"}) {
				t.Errorf("%v: endpoints %+v; want the port named metrics, honorLabels, node from the pod's node", o, eps)
			}
		case "PrometheusRule":
			var r prometheusRuleObject
			strict(t, o, &r)
			var want any
			rules, err := os.ReadFile(rulesFile)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(rules, &want); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(r.Spec)
			wantJSON, _ := json.Marshal(want)
			if !bytes.Equal(got, wantJSON) {
				t.Errorf("%v: its spec is not %s's groups", o, rulesFile)
			}
		case "ConfigMap":
			var c corev1.ConfigMap
			strict(t, o, &c)
			if c.Name != "carve-dashboard" {
				continue
			}
			if c.Labels["grafana_dashboard"] != "1" || c.Data["carve-dashboard.json"] != string(renderDashboard(t)) {
				t.Errorf("%v: labels %v, want grafana_dashboard: \"1\" and the dashboard in carve-dashboard.json", o, c.Labels)
			}
		}
	}
	// A ServiceMonitor's Services: both components', none else.
	for _, o := range objs {
		if o.Kind != "ServiceMonitor" {
			continue
		}
		var m monitor
		strict(t, o, &m)
		n := 0
		for _, s := range services {
			if m.Spec.Selector.matches(s.Labels) {
				n++
			}
		}
		if n != 2 || found["Service"] != 2 {
			t.Errorf("%v selects %d of %d Services; want the two metrics Services", o, n, found["Service"])
		}
	}
	return found
}

// TestMonitoringExample: the kustomize example's objects, as written,
// against the base's pods.
func TestMonitoringExample(t *testing.T) {
	base := baseObjects(t)
	var objs []object
	for _, dir := range []string{monitoringDir, monitoringDir + "/rules", monitoringDir + "/podmonitor"} {
		objs = append(objs, loadDir(t, dir)...)
		readKustomization(t, dir)
	}
	decodeAll(t, objs)
	found := checkMonitoring(t, objs, base)
	for kind, n := range map[string]int{"Service": 2, "ServiceMonitor": 1, "PodMonitor": 1, "PrometheusRule": 1} {
		if found[kind] != n {
			t.Errorf("%d %s in %s, want %d", found[kind], kind, monitoringDir, n)
		}
	}
	// The dashboard's ConfigMap is generated from the copy beside it.
	k := readKustomization(t, monitoringDir+"/rules")
	if len(k.ConfigMapGenerator) != 1 || !slices.Equal(k.ConfigMapGenerator[0].Files, []string{"carve-dashboard.json"}) {
		t.Errorf("%s/rules generates %+v; want carve-dashboard from carve-dashboard.json", monitoringDir, k.ConfigMapGenerator)
	}
	// Opt-in: the examples' kustomization does not apply it.
	for _, r := range readKustomization(t, "kubernetes/examples").Resources {
		if strings.HasPrefix(filepath.Clean(filepath.Join("kubernetes/examples", r)), monitoringDir) {
			t.Errorf("the examples' kustomization applies %s: monitoring needs the Prometheus Operator's CRDs, opt-in", r)
		}
	}
}
