package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fuzzFunc finds fuzz targets in a test file.
var fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)

// eachTestFile calls visit with the path (from this directory) and the
// source of every test file of the module's packages.
func eachTestFile(t *testing.T, visit func(path, src string)) {
	t.Helper()
	for _, root := range []string{"cmd", "deploy", "driver", "lvm", "scripts", "test"} {
		err := filepath.WalkDir("../../"+root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err == nil {
				visit(path, string(src))
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// makeList reads a Makefile variable's words (with its continuation
// lines).
func makeList(t *testing.T, makefile, name string) []string {
	t.Helper()
	start := strings.Index(makefile, "\n"+name+" := ")
	if start < 0 {
		t.Fatalf("Makefile has no %s", name)
	}
	var words []string
	for _, line := range strings.Split(makefile[start+len(name)+5:], "\n") {
		more := strings.HasSuffix(line, "\\")
		words = append(words, strings.Fields(strings.TrimSuffix(line, "\\"))...)
		if !more {
			break
		}
	}
	return words
}

// TestEveryFuzzTargetRuns: every fuzz target in the sources is in the
// Makefile's FUZZ_TARGETS (make fuzz, and CI's bounded run) or, with the
// reason given there, in FUZZ_SEEDS_ONLY; every listed one exists; and each
// has a committed corpus of hand-picked inputs in testdata/fuzz/<name>.
func TestEveryFuzzTargetRuns(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	listed := makeList(t, string(b), "FUZZ_TARGETS")
	seedsOnly := makeList(t, string(b), "FUZZ_SEEDS_ONLY")
	var found []string
	eachTestFile(t, func(path, src string) {
		pkg := strings.TrimPrefix(filepath.Dir(path), "../../")
		for _, m := range fuzzFunc.FindAllStringSubmatch(src, -1) {
			target := pkg + ":" + m[1]
			found = append(found, target)
			corpus, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "testdata", "fuzz", m[1], "*"))
			if len(corpus) == 0 {
				t.Errorf("%s has no committed corpus in %s/testdata/fuzz/%s", target, pkg, m[1])
			}
		}
	})
	if len(found) < 20 {
		t.Fatalf("found only %d fuzz targets: %v", len(found), found)
	}
	for _, f := range found {
		if !slices.Contains(listed, f) && !slices.Contains(seedsOnly, f) {
			t.Errorf("fuzz target %s is not in the Makefile's FUZZ_TARGETS (nor FUZZ_SEEDS_ONLY): make fuzz and CI skip it", f)
		}
	}
	for _, l := range append(listed, seedsOnly...) {
		if !slices.Contains(found, l) {
			t.Errorf("Makefile lists fuzz target %s, which the sources do not have", l)
		}
	}
}
