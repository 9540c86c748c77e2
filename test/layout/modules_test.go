package layout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchReportIsItsOwnModule: the benchmark report's plots need
// gonum/plot, and only they do, so the report is a module of its own
// (test/bench/report/go.mod) and the driver's module graph, which every
// build, the image's included, downloads, carries none of it. The unit
// tests (go test ./...) do not reach into that module, so it holds no
// tests: what can be tested without gonum lives in the driver's module
// (test/bench/table, test/bench/results).
func TestBenchReportIsItsOwnModule(t *testing.T) {
	root, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(root), "gonum.org/") {
		t.Error("go.mod requires a gonum module: only test/bench/report's plots use gonum, in that module's own go.mod")
	}
	report, err := os.ReadFile("../bench/report/go.mod")
	if err != nil {
		t.Fatalf("the benchmark report has no go.mod of its own: %v", err)
	}
	if tests, _ := filepath.Glob("../bench/report/*_test.go"); len(tests) > 0 {
		t.Errorf("test/bench/report has tests (%v), which go test ./... does not run: move the code they test into the driver's module (test/bench/table)", tests)
	}
	if !strings.Contains(string(report), "\nreplace carve.dev/carve => ../../..\n") {
		t.Error("test/bench/report/go.mod must take carve.dev/carve (its results package) from this checkout: replace carve.dev/carve => ../../..")
	}
}
