package volume

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"carve.dev/carve/lvm"
)

// TestEverySentinelHasARow reads the sources of this package and of package
// lvm: every package-level Err* variable must be named in codeTable, so that
// no sentinel ends as INTERNAL by omission.
func TestEverySentinelHasARow(t *testing.T) {
	declared := append(sentinels(t, ".", ""), sentinels(t, "../../lvm", "lvm.")...)
	rows := tableRows(t)
	for _, name := range declared {
		if !rows[name] {
			t.Errorf("sentinel %s has no row in codeTable", name)
		}
	}
	if len(declared) < 30 {
		t.Errorf("found only %d sentinels: %v", len(declared), declared)
	}
}

// TestRowsAreReachable: each row's error, wrapped, maps to that row's code,
// so that no row is hidden behind an earlier one.
func TestRowsAreReachable(t *testing.T) {
	for _, r := range codeTable {
		if got := CodeOf(fmt.Errorf("context: %w", r.kind)); got != r.code {
			t.Errorf("%v -> %v, want %v", r.kind, got, r.code)
		}
	}
}

// The two that used to end as INTERNAL.
func TestFormerGaps(t *testing.T) {
	if got := CodeOf(fmt.Errorf("lvcreate vg/x: %w: size must be greater than zero", lvm.ErrInvalidArgument)); got != codes.InvalidArgument {
		t.Errorf("lvm's invalid argument -> %v", got)
	}
	if got := CodeOf(fmt.Errorf("%w %q", ErrUnsupportedFilesystem, "zfs")); got != codes.InvalidArgument {
		t.Errorf("unsupported filesystem -> %v", got)
	}
}

// sentinels lists the package-level variables named Err* in dir's non-test
// files, each with prefix.
func sentinels(t *testing.T, dir, prefix string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") {
						out = append(out, prefix+n.Name)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// tableRows names the errors codeTable's rows hold, as written in codes.go.
func tableRows(t *testing.T) map[string]bool {
	t.Helper()
	af, err := parser.ParseFile(token.NewFileSet(), "codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	ast.Inspect(af, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "codeTable" {
			return true
		}
		for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
			switch k := e.(*ast.CompositeLit).Elts[0].(type) {
			case *ast.Ident:
				rows[k.Name] = true
			case *ast.SelectorExpr:
				rows[k.X.(*ast.Ident).Name+"."+k.Sel.Name] = true
			}
		}
		return false
	})
	if len(rows) == 0 {
		t.Fatal("codeTable not found in codes.go")
	}
	return rows
}
