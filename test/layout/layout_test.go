// Package layout checks that Carve's imports run one way: each package
// imports only packages of a lower layer, never a sibling or a layer above
// it (README.md, Layout).
package layout

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "carve.dev/carve/"

// layerRow is a row of README.md's table of layers: the layer's number,
// then its packages, each in backquotes.
var layerRow = regexp.MustCompile("^\\| ([0-9]+) \\| (`[^|]+`) \\|$")

// readLayers reads the production packages' layers from README.md's
// Layout, the one place they are written: a package may import a package
// of a lower layer only.
func readLayers(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(b), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	_, table, ok := strings.Cut(layout, "\n| layer | packages |\n|---|---|\n")
	if !ok {
		t.Fatal("README.md's Layout has no table of layers (| layer | packages |)")
	}
	layers := map[string]int{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		m := layerRow.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("README.md's table of layers: row %q is not | N | `package`, ... |", line)
		}
		rank, _ := strconv.Atoi(m[1])
		for _, p := range strings.Split(m[2], ", ") {
			name := strings.Trim(p, "`")
			if _, dup := layers[name]; dup {
				t.Fatalf("README.md's table of layers names %s twice", name)
			}
			layers[name] = rank
		}
	}
	if len(layers) == 0 {
		t.Fatal("README.md's table of layers is empty")
	}
	return layers
}

type pkg struct {
	ImportPath string
	Imports    []string
}

func TestImportsRunOneWay(t *testing.T) {
	layers := readLayers(t)
	out, err := exec.Command("go", "list", "-json", "carve.dev/carve/cmd/...", "carve.dev/carve/driver/...", "carve.dev/carve/lvm/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(p.ImportPath, module)
		rank, ok := layers[name]
		if !ok {
			t.Errorf("package %s has no layer: add it to README.md's table of layers", name)
			continue
		}
		seen++
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			if strings.HasPrefix(dep, "test/") {
				t.Errorf("%s imports test support %s", name, dep)
				continue
			}
			if r, ok := layers[dep]; ok && r >= rank {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must run downwards", name, rank, dep, r)
			}
		}
	}
	if seen != len(layers) {
		t.Errorf("go list found %d of the %d packages of README.md's table of layers", seen, len(layers))
	}
}
