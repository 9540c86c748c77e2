package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPlanMatchesModules: each committed module's tools.go keeps exactly
// the plan's packages from elsewhere in its go.mod (go mod tidy drops the
// rest), and its own main packages are there.
func TestPlanMatchesModules(t *testing.T) {
	v := readVersions(t)
	want := map[string][]string{}
	for _, g := range append(basePlan(v), upstreamPlan(v)...) {
		for _, p := range g.pkgs {
			if strings.HasPrefix(p, "./") {
				if _, err := os.Stat(filepath.Join("../modules", g.module, p, "main.go")); err != nil {
					t.Errorf("module %s: %v", g.module, err)
				}
				continue
			}
			want[g.module] = append(want[g.module], p)
		}
	}
	if want["kube"] == nil || want["provisioner"] == nil || want["ginkgo"] == nil {
		t.Fatalf("plan's modules: %v", want)
	}
	for mod, pkgs := range want {
		got := toolImports(t, filepath.Join("../modules", mod, "tools.go"))
		slices.Sort(pkgs)
		if !slices.Equal(got, pkgs) {
			t.Errorf("modules/%s/tools.go imports %v; the plan builds %v", mod, got, pkgs)
		}
	}
}

// toolImports are a tools.go's imports, sorted. The upstream suite's
// test/e2e/storage/external is imported for e2e.test's sake (the package
// that registers the external driver's tests), not built on its own.
func toolImports(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, imp := range f.Imports {
		p := strings.Trim(imp.Path.Value, `"`) // an import path needs no escapes
		if !strings.HasSuffix(p, "/test/e2e/storage/external") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
