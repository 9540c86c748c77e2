package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goMod is what go mod edit -json says of a go.mod.
type goMod struct {
	Require []struct{ Path, Version string }
	Replace []struct {
		Old, New struct{ Path, Version string }
	}
}

func readGoMod(t *testing.T, module string) (goMod, map[string]string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "mod", "edit", "-json",
		filepath.Join("../modules", module, "go.mod")).Output()
	if err != nil {
		t.Fatalf("go mod edit -json modules/%s/go.mod: %v", module, err)
	}
	var m goMod
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	req := map[string]string{}
	for _, r := range m.Require {
		req[r.Path] = r.Version
	}
	return m, req
}

// TestModulesNameThePins: each committed module's go.mod requires the
// versions versions.sh pins (what the binaries report, the images the
// e2e names and the cache key all come from there), so a pin changed in
// one place only fails here rather than building something else.
func TestModulesNameThePins(t *testing.T) {
	v := readVersions(t)
	kube, req := readGoMod(t, "kube")
	want := map[string]string{}
	for _, p := range []string{"K8S", "ETCD", "ATTACHER", "RESIZER", "SNAPSHOTTER", "SNAPSHOT_CRD", "HELM"} {
		want[v.get(p+"_MODULE")] = v.get(p + "_VERSION")
	}
	for _, m := range v.arrays["ETCD_SIBLINGS"] {
		want[m] = v.get("ETCD_VERSION")
	}
	checkRequires(t, "kube", req, want)
	// The staging modules at v0.X.Y of Kubernetes v1.X.Y, as the
	// kubernetes repository has them from ./staging.
	staging := 0
	for _, r := range kube.Replace {
		if strings.HasPrefix(r.Old.Path, "k8s.io/") && r.New.Path == r.Old.Path {
			staging++
			if r.New.Version != v.stagingVersion() {
				t.Errorf("modules/kube: %s replaced by %s, want %s", r.Old.Path, r.New.Version, v.stagingVersion())
			}
		}
	}
	if staging < 20 {
		t.Errorf("modules/kube replaces only %d staging modules", staging)
	}
	_, req = readGoMod(t, "provisioner")
	checkRequires(t, "provisioner", req, map[string]string{v.get("PROVISIONER_MODULE"): v.get("PROVISIONER_VERSION")})
}

// TestGinkgoCLIMatchesTheLibrary: the ginkgo CLI and the library in
// e2e.test speak a protocol to each other, so the CLI's module is at the
// kube graph's Ginkgo version.
func TestGinkgoCLIMatchesTheLibrary(t *testing.T) {
	const ginkgo = "github.com/onsi/ginkgo/v2"
	_, kube := readGoMod(t, "kube")
	_, cli := readGoMod(t, "ginkgo")
	if kube[ginkgo] == "" || cli[ginkgo] != kube[ginkgo] {
		t.Errorf("modules/ginkgo requires %s %q; the kube graph has %q", ginkgo, cli[ginkgo], kube[ginkgo])
	}
}

func checkRequires(t *testing.T, module string, req, want map[string]string) {
	t.Helper()
	for m, ver := range want {
		if req[m] != ver {
			t.Errorf("modules/%s/go.mod requires %s %q; versions.sh pins %s", module, m, req[m], ver)
		}
	}
}
