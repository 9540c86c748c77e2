package main

import (
	"slices"
	"testing"
)

// TestFingerprintCoversEveryInput: a change to any file of the recipe, or
// to the Go version, is a new stamp (so the binaries are rebuilt), while
// the order the files are read in is none.
func TestFingerprintCoversEveryInput(t *testing.T) {
	files := []input{{"scripts/k8s/versions.sh", []byte("K8S_VERSION=v1.37.2\n")},
		{"scripts/k8s/modules/kube/go.mod", []byte("module m\n")},
		{"scripts/k8s/build/main.go", []byte("package main\n")}}
	base := fingerprint(files, "go1.26.8")
	if got := fingerprint([]input{files[2], files[0], files[1]}, "go1.26.8"); got != base {
		t.Error("the files' order changed the fingerprint")
	}
	if fingerprint(files, "go1.26.9") == base {
		t.Error("another Go version kept the fingerprint")
	}
	for i := range files {
		changed := slices.Clone(files)
		changed[i].data = append(slices.Clone(files[i].data), ' ')
		if fingerprint(changed, "go1.26.8") == base {
			t.Errorf("a change to %s kept the fingerprint", files[i].name)
		}
		if fingerprint(slices.Delete(slices.Clone(files), i, i+1), "go1.26.8") == base {
			t.Errorf("without %s, the same fingerprint", files[i].name)
		}
	}
	// Bytes moved from one file to the next are a change too.
	moved := []input{{"a", []byte("xy")}, {"b", []byte("z")}}
	if fingerprint(moved, "") == fingerprint([]input{{"a", []byte("x")}, {"b", []byte("yz")}}, "") {
		t.Error("moving a byte between files kept the fingerprint")
	}
}

// TestRecipeFiles: the recipe holds the committed modules' files and the
// tool's sources, its tests apart.
func TestRecipeFiles(t *testing.T) {
	t.Chdir("../../..")
	files, err := recipeFiles()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.name)
	}
	for _, want := range []string{"scripts/k8s/versions.sh", "scripts/goenv.sh", "scripts/k8s/build.sh",
		"scripts/k8s/modules/kube/go.mod", "scripts/k8s/modules/kube/go.sum", "scripts/k8s/modules/kube/etcd/main.go",
		"scripts/k8s/modules/provisioner/go.sum", "scripts/k8s/modules/ginkgo/go.mod", "scripts/k8s/build/plan.go"} {
		if !slices.Contains(names, want) {
			t.Errorf("the recipe misses %s", want)
		}
	}
	for _, n := range names {
		if n == "scripts/k8s/build/plan_test.go" {
			t.Errorf("the recipe holds a test, %s", n)
		}
	}
}
