// Package layout checks that Carve's imports run one way: each package
// imports only packages of a lower layer, never a sibling or a layer above
// it (README.md, Layout).
package layout

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "carve.dev/carve/"

// layers ranks the production packages, lowest first. A package may import
// a package of a lower rank only: the CSI services, the node agent and the
// controller backend share rank 5 and so never import one another.
var layers = map[string]int{
	"lvm/runner":              0,
	"lvm":                     1,
	"driver/volume":           2,
	"driver/metrics":          2,
	"driver/crashpoint":       2,
	"driver/healthz":          2,
	"driver/registration":     2,
	"driver/internal/keylock": 2,
	"driver/lvmvol":           4,
	"driver/nodefs":           3,
	"driver/mapper":           3,
	"driver/crypt":            4,
	"driver/nodepath":         3,
	"driver/iolimit":          3,
	"driver/api/v1alpha1":     3,
	"driver/nodeloss":         4,
	"driver/csi":              5,
	"driver/agent":            5,
	"driver/backend":          5,
	"cmd/carve":               6,
}

type pkg struct {
	ImportPath string
	Imports    []string
}

func TestImportsRunOneWay(t *testing.T) {
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
			t.Errorf("package %s has no layer: add it to layers (and README.md's Layout)", name)
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
		t.Errorf("go list found %d of the %d ranked packages", seen, len(layers))
	}
}
