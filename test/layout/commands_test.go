package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// shells are the names a command through a shell would start with.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "/bin/sh": true, "/bin/bash": true,
	"/usr/bin/sh": true, "/usr/bin/bash": true, "/usr/bin/env": true}

// TestNoShellAndOneRunner reads Carve's production sources: no string
// names a shell, none but in driver/lvmvol/tags.go (the tag schema, whose
// own test checks that it lists them) is an LV tag, and only lvm/runner (the one runner: context, timeout, no
// shell) starts processes with os/exec; elsewhere os/exec may only look a
// tool up (exec.LookPath). (nodefs hands mount-utils the k8s.io/utils/exec
// it requires, bounded by the runner's deadlines: nodefs/exec.go.)
func TestNoShellAndOneRunner(t *testing.T) {
	files := 0
	for _, root := range []string{"../../cmd", "../../driver", "../../lvm"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			files++
			checkFile(t, path)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 50 {
		t.Fatalf("read only %d files", files)
	}
}

func checkFile(t *testing.T, path string) {
	t.Helper()
	af, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	execName := ""
	for _, imp := range af.Imports {
		if imp.Path.Value == `"os/exec"` {
			execName = "exec"
			if imp.Name != nil {
				execName = imp.Name.Name
			}
		}
	}
	runner := filepath.ToSlash(filepath.Dir(path)) == "../../lvm/runner"
	ast.Inspect(af, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(n.Value)
			if err != nil || n.Kind != token.STRING {
				break
			}
			if shells[s] {
				t.Errorf("%s names a shell: %s", path, n.Value)
			}
			if lvTag(s) && filepath.ToSlash(path) != "../../driver/lvmvol/tags.go" {
				t.Errorf("%s: %q: Carve's LV tags are defined in driver/lvmvol/tags.go, their schema, only", path, s)
			}
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && execName != "" && x.Name == execName && !runner && n.Sel.Name != "LookPath" {
				t.Errorf("%s uses os/exec.%s: commands go through lvm/runner", path, n.Sel.Name)
			}
		}
		return true
	})
}

// lvTag tells a string that may be an LV tag of Carve's: it starts with
// "carve.dev/" and is no path of Carve's Go module.
func lvTag(s string) bool {
	return strings.HasPrefix(s, "carve.dev/") && s != "carve.dev/carve" && !strings.HasPrefix(s, "carve.dev/carve/")
}
