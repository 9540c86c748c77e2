package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// testFunc finds top-level test functions in a test file.
var testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(\w+ \*testing\.T\)`)

// readmeTest finds test names in prose (of a subtest, TestName/Sub, the
// test's).
var readmeTest = regexp.MustCompile(`\bTest[A-Z]\w*`)

// suites are the directories whose tests test/README.md lists one by one,
// each with the files of that suite (the lvm package's VM tests among its
// unit tests).
var suites = map[string]string{
	"lvm":             "lvm_vm_*_test.go",
	"test/lifecycle":  "*_test.go",
	"test/nodesafety": "*_test.go",
	"test/crash":      "*_test.go",
	"test/faults":     "*_test.go",
	"test/soak":       "*_test.go",
	"test/sanity":     "*_test.go",
	"test/image":      "*_test.go",
	"test/bench":      "*_test.go",
	"test/e2e":        "*_test.go",
}

// testsIn lists the test functions of the files matching glob in dir.
func testsIn(t *testing.T, dir, glob string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("../..", dir, glob))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no test files %s (%v)", dir, glob, err)
	}
	var names []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
			names = append(names, m[1])
		}
	}
	return names
}

// TestREADMENamesEveryTest holds test/README.md to the sources: every test
// of the suites it lists one by one is named there, and every test it
// names (of any package) exists.
func TestREADMENamesEveryTest(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	named := readmeTest.FindAllString(readme, -1)
	for dir, glob := range suites {
		for _, name := range testsIn(t, dir, glob) {
			if !slices.Contains(named, name) {
				t.Errorf("test/README.md does not name %s's %s: give it a line saying what it proves", dir, name)
			}
		}
	}
	var all []string
	eachTestFile(t, func(_, src string) {
		for _, m := range testFunc.FindAllStringSubmatch(src, -1) {
			all = append(all, m[1])
		}
	})
	for _, name := range named {
		if !slices.Contains(all, name) {
			t.Errorf("test/README.md names %s, which no test file has", name)
		}
	}
}
