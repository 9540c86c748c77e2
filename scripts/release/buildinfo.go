package main

import (
	"debug/buildinfo"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
)

// goModule is a Go module linked into the binary, or the standard library
// (Path "stdlib", as purl's golang type names it).
type goModule struct {
	Path, Version string
	// Purpose is SPDX's primaryPackagePurpose: the main module is the
	// application, the rest are libraries.
	Purpose string
	// Comment says what a replace directive changed, so a reader of the
	// SBOM can tell the module from the one go.mod requires.
	Comment string
}

// readGoModules reads the modules the Go binary at path was built from.
func readGoModules(path string) ([]goModule, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("go build info %s: %w", path, err)
	}
	return goModules(bi), nil
}

// goModules lists the main module, every dependency and the standard
// library, sorted by path (then version) so the SBOM does not depend on
// the order the linker wrote them.
func goModules(bi *debug.BuildInfo) []goModule {
	var mods []goModule
	if bi.Main.Path != "" {
		mods = append(mods, module(bi.Main, "APPLICATION"))
	}
	for _, d := range bi.Deps {
		mods = append(mods, module(*d, "LIBRARY"))
	}
	mods = append(mods, goModule{Path: "stdlib", Version: goVersion(bi.GoVersion), Purpose: "LIBRARY"})
	sort.SliceStable(mods, func(i, j int) bool {
		if mods[i].Path != mods[j].Path {
			return mods[i].Path < mods[j].Path
		}
		return mods[i].Version < mods[j].Version
	})
	return mods
}

// module is what was linked for m: a replacement's code, not the required
// module's, is in the binary, so the replacement is what the SBOM names.
func module(m debug.Module, purpose string) goModule {
	r := m.Replace
	switch {
	case r == nil:
		return goModule{Path: m.Path, Version: m.Version, Purpose: purpose}
	case localDir(r.Path):
		// A directory replacement has no module version (build info says
		// "(devel)"), and its path is one on the builder's machine, which
		// the SBOM leaves out: it names the module it stands in for.
		return goModule{Path: m.Path, Version: "(devel)", Purpose: purpose,
			Comment: fmt.Sprintf("%s %s replaced by a local directory", m.Path, m.Version)}
	default:
		return goModule{Path: r.Path, Version: r.Version, Purpose: purpose,
			Comment: fmt.Sprintf("replaces %s %s", m.Path, m.Version)}
	}
}

// localDir tells a replacement by a directory ("./dep", "../x", an
// absolute path) from one by another module, whose path never starts so.
func localDir(path string) bool {
	return path == "." || path == ".." || strings.HasPrefix(path, "./") || strings.HasPrefix(path, "../") || filepath.IsAbs(path)
}

// goVersion is the toolchain's release, "go1.26.8", without the
// experiments a build may list after it ("go1.26.8 X:...").
func goVersion(v string) string {
	if f := strings.Fields(v); len(f) > 0 {
		return f[0]
	}
	return ""
}
