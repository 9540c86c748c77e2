package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// Monitoring: Carve's alerts (monitoring/carve-rules.yaml, a Prometheus
// rule file), their promtool tests (monitoring/carve-rules_test.yaml), and
// the queries of the alerts and the Grafana dashboard (dashboard_test.go)
// against the metrics Carve exports.
const (
	rulesFile        = "monitoring/carve-rules.yaml"
	rulesTestFile    = "monitoring/carve-rules_test.yaml"
	metricsReference = "../docs/metrics.md"
)

// ruleFile is a Prometheus rule file, as far as Carve's uses it.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	var f ruleFile
	readYAML(t, rulesFile, &f)
	return f
}

// alerts lists the rules of f, each with a pointer to edit it by.
func (f *ruleFile) alerts() []*rule {
	var out []*rule
	for g := range f.Groups {
		for r := range f.Groups[g].Rules {
			out = append(out, &f.Groups[g].Rules[r])
		}
	}
	return out
}

// TestAlertsAreDocumented: every rule is an alert with a severity, a
// summary and a description; deploy/README.md explains it, and the
// promtool tests check it.
func TestAlertsAreDocumented(t *testing.T) {
	f := readRules(t)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, monitoring, _ := strings.Cut(string(readme), "\n## Monitoring\n")
	monitoring, _, _ = strings.Cut(monitoring, "\n## ")
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	alerts := f.alerts()
	if len(alerts) < 10 {
		t.Fatalf("%d alerts in %s", len(alerts), rulesFile)
	}
	for _, r := range alerts {
		switch {
		case r.Alert == "":
			t.Errorf("%s: a rule that is no alert: %q", rulesFile, r.Expr)
		case !map[string]bool{"info": true, "warning": true, "critical": true}[r.Labels["severity"]]:
			t.Errorf("%s: severity %q, want info, warning or critical", r.Alert, r.Labels["severity"])
		case r.Annotations["summary"] == "" || r.Annotations["description"] == "":
			t.Errorf("%s: no summary or description", r.Alert)
		case !strings.Contains(monitoring, "`"+r.Alert+"`"):
			t.Errorf("%s: deploy/README.md, Monitoring, does not say what it means and what to do", r.Alert)
		case !strings.Contains(string(tests), "alertname: "+r.Alert+"\n"):
			t.Errorf("%s: %s does not test it", r.Alert, rulesTestFile)
		}
	}
}

// promtool finds promtool: CARVE_PROMTOOL (make test-unit sets it to the
// one scripts/promtool.sh builds), else the one that script built, else
// PATH; without one the test skips.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CARVE_PROMTOOL"); p != "" {
		return p
	}
	if built, _ := filepath.Glob("../_output/tools/promtool-*/promtool"); len(built) > 0 {
		p, err := filepath.Abs(built[len(built)-1])
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	t.Skip("no promtool (scripts/promtool.sh builds it; make test-unit does, and sets CARVE_PROMTOOL): the rules are not checked")
	return ""
}

// runIn runs promtool in dir; ok is whether it succeeded.
func runIn(t *testing.T, dir, bin string, args ...string) (out string, ok bool) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("promtool %s: %v", strings.Join(args, " "), err)
	}
	return string(b), err == nil
}

// TestAlertRules: promtool finds the rules valid and lint-free, and
// carve-rules_test.yaml passes. Then the tests are held to account: with
// any alert made never to fire, or its threshold loosened (halved, or
// doubled for a "<"; 0 lowered to -1) or tightened (the other way; a 0,
// "any at all", is not tightened), they must fail.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	if out, ok := runIn(t, "monitoring", bin, "check", "rules", "--lint-fatal", filepath.Base(rulesFile)); !ok {
		t.Fatalf("promtool check rules:\n%s", out)
	}
	if out, ok := runIn(t, "monitoring", bin, "test", "rules", filepath.Base(rulesTestFile)); !ok {
		t.Fatalf("promtool test rules:\n%s", out)
	}
	tests, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	// Each changed copy in a directory of its own, beside the tests; one
	// promtool run takes them all and reports on each test file.
	dir := t.TempDir()
	all := readRules(t)
	var mutants []string
	for i, r := range all.alerts() {
		for _, m := range []string{"never", "looser", "tighter"} {
			f := readRules(t)
			mutant := f.alerts()[i]
			if !mutate(t, mutant, m) {
				continue
			}
			sub := filepath.Join(dir, fmt.Sprint(len(mutants)))
			mutants = append(mutants, fmt.Sprintf("%s, %s (expr %q)", r.Alert, m, mutant.Expr))
			data, err := yaml.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, b := range map[string][]byte{filepath.Base(rulesFile): data, filepath.Base(rulesTestFile): tests} {
				if err := os.WriteFile(filepath.Join(sub, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	args := []string{"test", "rules"}
	for i := range mutants {
		args = append(args, filepath.Join(fmt.Sprint(i), filepath.Base(rulesTestFile)))
	}
	out, _ := runIn(t, dir, bin, args...)
	reports := strings.Split(out, "Processing test file: ")[1:]
	if len(reports) != len(mutants) {
		t.Fatalf("promtool reported on %d of %d test files:\n%s", len(reports), len(mutants), out)
	}
	for i, rep := range reports {
		if !strings.HasPrefix(rep, filepath.Join(fmt.Sprint(i), filepath.Base(rulesTestFile))+"\n") {
			t.Fatalf("promtool's report %d is not about copy %d:\n%s", i, i, rep)
		}
		if !strings.Contains(rep, "FAILED") {
			t.Errorf("%s: the promtool tests still pass", mutants[i])
		}
	}
	t.Logf("%d alerts tested; %d changed copies of them all failed the tests", len(all.alerts()), len(mutants))
}

// threshold is an expression's final comparison with a number.
var threshold = regexp.MustCompile(`([<>]=?)\s*([0-9.]+)\s*$`)

// mutate changes r as m says (see TestAlertRules); false when m does not
// apply to r.
func mutate(t *testing.T, r *rule, m string) bool {
	t.Helper()
	if m == "never" {
		r.Expr = "vector(1) > 2"
		return true
	}
	c := threshold.FindStringSubmatchIndex(r.Expr)
	if c == nil {
		t.Fatalf("%s: expression %q does not end in a comparison with a number", r.Alert, r.Expr)
	}
	op := r.Expr[c[2]:c[3]]
	v, err := strconv.ParseFloat(r.Expr[c[4]:c[5]], 64)
	if err != nil {
		t.Fatal(err)
	}
	// looser makes the alert fire more: a lower bound lower, an upper
	// bound higher.
	lower := strings.HasPrefix(op, ">") == (m == "looser")
	switch {
	case v == 0 && m == "tighter":
		return false
	case v == 0:
		v = -1
	case lower:
		v /= 2
	default:
		v *= 2
	}
	r.Expr = r.Expr[:c[4]] + strconv.FormatFloat(v, 'g', -1, 64) + r.Expr[c[5]:]
	return true
}
