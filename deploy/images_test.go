package deploy

import (
	"os"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

// The registry path of the official kubernetes-csi sidecar images.
const sigStorage = "registry.k8s.io/sig-storage/"

// testedImages: what the manifests must name by default, image name ->
// reference. Carve's is the Makefile's IMAGE (what `make image` builds);
// the sidecars are the official images at the versions the e2e test builds
// and runs (scripts/k8s/versions.sh).
func testedImages(t *testing.T) map[string]string {
	t.Helper()
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGE\s*\?=\s*(\S+)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no IMAGE ?= line")
	}
	vs, err := os.ReadFile("../scripts/k8s/versions.sh")
	if err != nil {
		t.Fatal(err)
	}
	version := func(v string) string {
		m := regexp.MustCompile(`(?m)^` + v + `=(v\S+)$`).FindSubmatch(vs)
		if m == nil {
			t.Fatalf("versions.sh: no %s", v)
		}
		return string(m[1])
	}
	return map[string]string{
		"carve":           string(m[1]),
		"csi-provisioner": sigStorage + "csi-provisioner:" + version("PROVISIONER_VERSION"),
		"csi-attacher":    sigStorage + "csi-attacher:" + version("ATTACHER_VERSION"),
		"csi-resizer":     sigStorage + "csi-resizer:" + version("RESIZER_VERSION"),
		"csi-snapshotter": sigStorage + "csi-snapshotter:" + version("SNAPSHOTTER_VERSION"),
	}
}

// TestKustomizeImages: the base's images: entries give the tested images.
func TestKustomizeImages(t *testing.T) {
	want := testedImages(t)
	got := map[string]string{}
	for _, im := range readKustomization(t, "kubernetes/base").Images {
		got[im.Name] = im.NewName + ":" + im.NewTag
	}
	for name, ref := range want {
		if got[name] != ref {
			t.Errorf("kustomize image %s: %q, want %q", name, got[name], ref)
		}
	}
	if len(got) != len(want) {
		t.Errorf("kustomize images %v, want exactly %v", got, want)
	}
}

// TestHelmImages: the chart's default values give the tested images, and
// its appVersion is Carve's tag.
func TestHelmImages(t *testing.T) {
	want := testedImages(t)
	type ref struct{ Repository, Tag string }
	var values struct {
		Image    ref
		Sidecars struct{ Provisioner, Attacher, Resizer, Snapshotter ref }
	}
	b, err := os.ReadFile("helm/carve/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	s := values.Sidecars
	got := map[string]ref{"carve": values.Image, "csi-provisioner": s.Provisioner,
		"csi-attacher": s.Attacher, "csi-resizer": s.Resizer, "csi-snapshotter": s.Snapshotter}
	for name, r := range got {
		if r.Repository+":"+r.Tag != want[name] {
			t.Errorf("helm values %s: %s:%s, want %s", name, r.Repository, r.Tag, want[name])
		}
	}
	var chart struct{ AppVersion string }
	if b, err = os.ReadFile("helm/carve/Chart.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.AppVersion != values.Image.Tag {
		t.Errorf("Chart.yaml appVersion %q, image tag %q", chart.AppVersion, values.Image.Tag)
	}
}

// checkTestedImages: every container of the rendered objects runs one of
// the tested images, and each of them is used.
func checkTestedImages(t *testing.T, objs []object) {
	t.Helper()
	want := map[string]bool{}
	for _, ref := range testedImages(t) {
		want[ref] = false
	}
	for _, im := range checkImages(t, objs, true) {
		if _, ok := want[im]; !ok {
			t.Errorf("rendered image %q is not one of the tested images", im)
		}
		want[im] = true
	}
	for ref, used := range want {
		if !used {
			t.Errorf("no container runs %s", ref)
		}
	}
}
