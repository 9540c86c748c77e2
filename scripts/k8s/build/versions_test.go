package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readVersions parses the repository's versions.sh.
func readVersions(t *testing.T) versions {
	t.Helper()
	src, err := os.ReadFile("../versions.sh")
	if err != nil {
		t.Fatal(err)
	}
	v, err := parseVersions(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestKeyIsTheShells: the shell scripts (cluster.sh, e2e.sh, ...) find
// the binaries through versions.sh's K8S_DIR; the tool must build into
// that very directory.
func TestKeyIsTheShells(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	cache := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "bash", "-c", `source "$1" && printf %s "$K8S_DIR"`, "-", "../versions.sh")
	cmd.Env = append(os.Environ(), "CARVE_K8S_CACHE="+cache)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("source versions.sh: %v", err)
	}
	if want := filepath.Join(cache, readVersions(t).key()); string(out) != want {
		t.Errorf("versions.sh's K8S_DIR is %s, the tool's %s", out, want)
	}
}

func TestParseVersions(t *testing.T) {
	v := readVersions(t)
	if got := v.get("SNAPSHOT_CRD_VERSION"); got != v.get("SNAPSHOTTER_VERSION") || got == "" {
		t.Errorf("SNAPSHOT_CRD_VERSION=$SNAPSHOTTER_VERSION read as %q", got)
	}
	if n := len(v.arrays["ETCD_SIBLINGS"]); n < 2 {
		t.Errorf("ETCD_SIBLINGS: %d modules", n)
	}
	for _, g := range v.arrays["SNAPSHOT_CRD_GLOBS"] {
		if filepath.Ext(g) != ".yaml" {
			t.Errorf("SNAPSHOT_CRD_GLOBS: %q kept its quotes", g)
		}
	}
	if _, err := parseVersions("K8S_VERSION=v1.2.3\n"); err == nil {
		t.Error("a file without most pins parsed")
	}
}

func TestStagingVersion(t *testing.T) {
	v := versions{vars: map[string]string{"K8S_VERSION": "v1.37.2"}}
	if got := v.stagingVersion(); got != "v0.37.2" {
		t.Errorf("staging version of v1.37.2: %s", got)
	}
	if got := k8sLdflags("v1.37.2"); !strings.Contains(got, "-X k8s.io/component-base/version.gitMinor=37") {
		t.Errorf("k8sLdflags: %s", got)
	}
}
