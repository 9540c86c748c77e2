package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// moduleOf prints a package's module and version (the replacement's, if
// replaced); nothing for the standard library.
const moduleOf = "{{if not .Standard}}{{with .Module}}{{.Path}} {{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}"

// drift lists the modules whose packages both Carve (its tests, every
// build tag) and the kube graph compile, at different versions. Each one
// (and everything above it, client-go included) is compiled twice in a
// cold run; Carve's go.mod should pin the kube graph's version
// (scripts/goenv.sh).
func (b builder) drift(ctx context.Context, kubePkgs []string) ([]string, error) {
	carve := map[string]map[string]bool{}
	for _, tags := range []string{"", "vmtest", "e2e", "image"} {
		out, err := b.gorun.run(ctx, ".", "list", "-deps", "-test", "-tags", tags, "-f", moduleOf, "./...")
		if err != nil {
			return nil, err
		}
		for mod, v := range modules(out) {
			if carve[mod] == nil {
				carve[mod] = map[string]bool{}
			}
			carve[mod][v] = true
		}
	}
	out, err := b.gorun.run(ctx, modulesDir+"/kube", append([]string{"list", "-deps", "-f", moduleOf}, kubePkgs...)...)
	if err != nil {
		return nil, err
	}
	return differing(carve, modules(out)), nil
}

// modules reads go list's "path version" lines.
func modules(out []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if path, v, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(path, "carve.dev/") {
			m[path] = v
		}
	}
	return m
}

// differing are the lines "path: carve V, kube graph W" for each module
// both use at different versions, sorted.
func differing(carve map[string]map[string]bool, kube map[string]string) []string {
	var out []string
	for mod, kv := range kube {
		for cv := range carve[mod] {
			if cv != kv {
				out = append(out, fmt.Sprintf("  %s: carve %s, kube graph %s", mod, cv, kv))
			}
		}
	}
	sort.Strings(out)
	return out
}

// graphGcflags: csi-provisioner's graph shares almost no module version
// with the kube graph (k8s.io/* v0.36 against v0.37, grpc, otel, x/net
// ...), so its client-go and the rest compile a second time, on the cold
// run's longest path (480 s of it). It compiles without optimisation, all
// of it but the standard library, which the other builds share: a
// sidecar's speed is not what the tests measure. The patterns are the
// first elements of the graph's import paths.
func (b builder) graphGcflags(ctx context.Context, dir string, pkgs []string) ([]string, error) {
	args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, pkgs...)
	out, err := b.gorun.run(ctx, dir, args...)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(p, "/")
		seen[first+"/..."] = true
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("go list named no packages for %v in %s", pkgs, dir)
	}
	pats := make([]string, 0, len(seen))
	for p := range seen {
		pats = append(pats, p)
	}
	sort.Strings(pats)
	return gcflagsFor(pats), nil
}
