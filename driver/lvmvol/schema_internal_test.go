package lvmvol

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"carve.dev/carve/lvm"
)

// TestTagSchema reads this package's sources: every tag tags.go defines
// is in schema, listed once, one lvm2 takes, with writers and clearers
// that exist. With test/layout, which finds no tag defined anywhere else
// in Carve's code, a tag is added only by adding it here; one made at run
// time from a tag that is not a constant of tags.go is what TestMain
// catches, through the fake lvm2.
func TestTagSchema(t *testing.T) {
	listed := map[string]bool{}
	for _, d := range schema {
		if listed[d.tag] {
			t.Errorf("schema lists %q twice", d.tag)
		}
		listed[d.tag] = true
		if err := lvm.ValidateTag(d.tag + "1"); err != nil {
			t.Errorf("schema: %q: %v", d.tag, err)
		}
		if len(d.on) == 0 || len(d.writers) == 0 {
			t.Errorf("schema: %q names no kind of LV or no writer", d.tag)
		}
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	funcs, defined := map[string]bool{}, 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range af.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok {
				funcs[fn.Name.Name] = true
			}
		}
		if name != "tags.go" {
			continue // test/layout: no tag there
		}
		for _, decl := range af.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
				continue
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				if s, err := strconv.Unquote(lit.Value); err == nil && strings.HasPrefix(s, "carve.dev/") {
					defined++
					if !listed[s] {
						t.Errorf("tags.go: tag %q is not in schema: add it, with its writers and clearers", s)
					}
				}
				return true
			})
		}
	}
	if defined < len(schema) {
		t.Errorf("tags.go defines %d tags, schema lists %d", defined, len(schema))
	}
	for _, d := range schema {
		for _, fn := range slices.Concat(d.writers, d.clearers) {
			if !funcs[fn] && !strings.HasPrefix(fn, "(") {
				t.Errorf("schema: %q: no function %s in this package", d.tag, fn)
			}
		}
	}
}

// TestInSchema: a flag is in the schema only as itself, a record only
// with its prefix.
func TestInSchema(t *testing.T) {
	for tag, want := range map[string]bool{
		TagVolume: true, TagVolume + "=x": false, tagHeld: true, tagMirrorsPrefix + "2": true,
		tagCopiedPrefix + "uuid:512": true, "carve.dev/unknown": false, "carve.dev/mirrors": false, "owner=a": false,
	} {
		if got := inSchema(tag); got != want {
			t.Errorf("inSchema(%q) = %t, want %t", tag, got, want)
		}
	}
}
