// Package deploy checks Carve's Kubernetes manifests (deploy/kubernetes)
// and Helm chart (deploy/helm/carve) without a cluster: every object
// decodes strictly into its Kubernetes type, the CSIDriver, the node
// DaemonSet and the controller Deployment have what Carve needs, every
// flag given to carve exists (read from `carve controller -h` and
// `carve node -h` of ./cmd/carve), every sidecar flag exists in the pinned
// sidecar version, RBAC grants what the code and the sidecars use, the
// node admission policy covers what RBAC lets the node write, the
// controller pod's containers run restricted, the controller's disruption
// budget never blocks a drain, the example VolumeAttributesClasses are
// opt-in, and the CRD copies match deploy/crds. The monitoring: every
// query of the alerts (monitoring/carve-rules.yaml) and the Grafana
// dashboard (written by dashboard_test.go) names metrics Carve exports,
// the chart and the kustomize example hold copies of both and scrape
// both components' metrics ports, and, with promtool (CARVE_PROMTOOL,
// scripts/promtool.sh's build, or PATH), the alerts pass their promtool
// tests, which fail when a threshold changes. When kubectl (kustomize)
// and helm are on
// PATH (or named by CARVE_KUBECTL / CARVE_HELM), the rendered output is
// checked the same way; otherwise those tests skip.
package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"
)

const (
	driverName  = "lvm.carve.dev"
	namespace   = "carve-system"
	controller  = "carve-controller" // Deployment and ServiceAccount
	node        = "carve-node"       // DaemonSet and ServiceAccount
	kubeletDir  = "/var/lib/kubelet"
	csiSockPath = "/csi/csi.sock" // the controller pod's shared socket
)

// ---------------------------------------------------------------------------
// Tests of the files as written

func TestEveryManifestDecodes(t *testing.T) {
	n := 0
	for _, f := range manifestFiles(t) {
		if isKustomization(f) {
			readKustomization(t, filepath.Dir(f))
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs := parseDocs(t, f, data)
		if len(objs) == 0 {
			t.Errorf("%s: no objects", f)
		}
		decodeAll(t, objs)
		n += len(objs)
	}
	t.Logf("%d objects decoded", n)
}

func TestKustomizationsListTheirFiles(t *testing.T) {
	for _, f := range manifestFiles(t) {
		if !isKustomization(f) {
			continue
		}
		dir := filepath.Dir(f)
		k := readKustomization(t, dir)
		if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
			t.Errorf("%s: apiVersion/kind %q %q", f, k.APIVersion, k.Kind)
		}
		listed := map[string]bool{}
		for _, r := range k.Resources {
			p := filepath.Join(dir, r)
			st, err := os.Stat(p)
			switch {
			case err != nil:
				t.Errorf("%s: resource %s: %v", f, r, err)
			case st.IsDir():
				if _, err := os.Stat(filepath.Join(p, "kustomization.yaml")); err != nil {
					t.Errorf("%s: resource %s is a directory without kustomization.yaml", f, r)
				}
			case !strings.HasPrefix(filepath.Clean(p), filepath.Clean(dir)+string(filepath.Separator)):
				t.Errorf("%s: resource %s is a file outside the kustomization (kustomize refuses it)", f, r)
			}
			listed[filepath.Clean(p)] = true
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") && !isKustomization(p) && !listed[filepath.Clean(p)] {
				t.Errorf("%s: %s is not in its resources", f, e.Name())
			}
		}
	}
}

// TestCRDCopies: the CRDs in the kustomize tree and the chart are
// deploy/crds byte for byte (run `make -C deploy crds` after make
// generate).
func TestCRDCopies(t *testing.T) {
	src, err := filepath.Glob("crds/*.yaml")
	if err != nil || len(src) == 0 {
		t.Fatalf("no CRDs in deploy/crds (%v)", err)
	}
	for _, dst := range []string{"kubernetes/crds", "helm/carve/crds"} {
		copies, _ := filepath.Glob(filepath.Join(dst, "*.yaml"))
		var names []string
		for _, c := range copies {
			if !isKustomization(c) {
				names = append(names, filepath.Base(c))
			}
		}
		var want []string
		for _, s := range src {
			want = append(want, filepath.Base(s))
			a, _ := os.ReadFile(s)
			b, err := os.ReadFile(filepath.Join(dst, filepath.Base(s)))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s/%s differs from deploy/crds: run `make -C deploy crds`", dst, filepath.Base(s))
			}
		}
		sort.Strings(names)
		if !slices.Equal(names, want) {
			t.Errorf("%s holds %v, deploy/crds %v: run `make -C deploy crds`", dst, names, want)
		}
	}
	k := readKustomization(t, "kubernetes/crds")
	var want []string
	for _, s := range src {
		want = append(want, filepath.Base(s))
	}
	if !slices.Equal(k.Resources, want) {
		t.Errorf("kubernetes/crds/kustomization.yaml lists %v, want %v: run `make -C deploy crds`", k.Resources, want)
	}
	if !slices.Contains(readKustomization(t, "kubernetes/base").Resources, "../crds") {
		t.Error("the base does not include ../crds")
	}
}

// baseObjects: the base's own objects (CRDs aside), as written.
func baseObjects(t *testing.T) []object {
	return loadDir(t, "kubernetes/base")
}

func TestBase(t *testing.T) {
	objs := baseObjects(t)
	checkAll(t, objs, namespace, kubeletDir)
	if _, ok := find(objs, "Namespace", namespace); !ok {
		t.Errorf("the base does not create namespace %s", namespace)
	}
	if !checkControllerPDB(t, objs) {
		t.Errorf("the base has no PodDisruptionBudget for %s", controller)
	}
	mustFind(t, objs, "ValidatingAdmissionPolicy", nodePolicy) // the name deploy/README.md gives
	k := readKustomization(t, "kubernetes/base")
	if k.Namespace != namespace {
		t.Errorf("base kustomization namespace %q", k.Namespace)
	}
	// Images: placeholders, each with a kustomize images: entry.
	overridable := map[string]bool{}
	for _, im := range k.Images {
		overridable[im.Name] = true
	}
	for _, im := range checkImages(t, objs, false) {
		if strings.ContainsAny(im, ":@") {
			t.Errorf("base image %q: leave the tag to the kustomization's images:", im)
		}
		if !overridable[im] {
			t.Errorf("base image %q has no images: entry in the kustomization", im)
		}
	}
	// The ConfigMap the pods read exists in the generator with every key.
	keys := map[string]bool{}
	for _, g := range k.ConfigMapGenerator {
		if g.Name != "carve-config" {
			continue
		}
		for _, l := range g.Literals {
			kv, _, _ := strings.Cut(l, "=")
			keys[kv] = true
		}
	}
	for _, o := range objs {
		spec, ok := podSpec(t, o)
		if !ok {
			continue
		}
		for _, c := range spec.Containers {
			for _, e := range c.Env {
				if r := e.ValueFrom; r != nil && r.ConfigMapKeyRef != nil {
					if r.ConfigMapKeyRef.Name != "carve-config" || !keys[r.ConfigMapKeyRef.Key] {
						t.Errorf("%v: env %s reads %s/%s, which the configMapGenerator does not make",
							o, e.Name, r.ConfigMapKeyRef.Name, r.ConfigMapKeyRef.Key)
					}
				}
			}
		}
	}
}

func TestExamples(t *testing.T) {
	objs := loadDir(t, "kubernetes/examples")
	decodeAll(t, objs)
	for _, name := range []string{"carve-thick", "carve-thin"} {
		var sc storagev1.StorageClass
		strict(t, mustFind(t, objs, "StorageClass", name), &sc)
		if sc.Parameters["csi.storage.k8s.io/fstype"] != "ext4" {
			t.Errorf("StorageClass %s: csi.storage.k8s.io/fstype %q, want ext4", name, sc.Parameters["csi.storage.k8s.io/fstype"])
		}
		if thin := sc.Parameters["thinPool"] != ""; thin != (name == "carve-thin") {
			t.Errorf("StorageClass %s: thinPool %q", name, sc.Parameters["thinPool"])
		}
	}
	for _, kind := range []string{"VolumeSnapshotClass", "VolumeGroupSnapshotClass"} {
		var c snapshotClass
		strict(t, mustFind(t, objs, kind, "carve"), &c)
		if c.Driver != driverName || c.DeletionPolicy != "Delete" || len(c.Parameters) != 0 {
			t.Errorf("%s carve: driver %q, deletionPolicy %q, parameters %v; want %s, Delete, none", kind, c.Driver, c.DeletionPolicy, c.Parameters, driverName)
		}
	}
	checkEncryptedExample(t, objs)
	if slices.ContainsFunc(objs, func(o object) bool { return o.Kind == "VolumeAttributesClass" }) {
		t.Errorf("kubernetes/examples holds a VolumeAttributesClass: the classes are opt-in, in %s", optInClasses)
	}
	for _, r := range readKustomization(t, "kubernetes/examples").Resources {
		if filepath.Clean(filepath.Join("kubernetes/examples", r)) == optInClasses {
			t.Errorf("the examples' kustomization applies %s, the opt-in VolumeAttributesClasses", r)
		}
	}
}

// optInClasses: the example VolumeAttributesClasses, which let a claim's
// owner add raid1 legs, lift IO limits or take a write cache, and are
// therefore applied only on request.
const optInClasses = "kubernetes/examples/volumeattributesclasses"

func TestOptInAttributesClasses(t *testing.T) {
	objs := loadDir(t, optInClasses)
	decodeAll(t, objs)
	for _, o := range objs {
		if o.Kind != "VolumeAttributesClass" {
			t.Errorf("%v: %s holds only VolumeAttributesClasses", o, optInClasses)
		}
	}
	for name, mirrors := range map[string]string{"carve-raid1": "1", "carve-linear": "0"} {
		var c storagev1.VolumeAttributesClass
		strict(t, mustFind(t, objs, "VolumeAttributesClass", name), &c)
		if c.Parameters["mirrors"] != mirrors {
			t.Errorf("VolumeAttributesClass %s: mirrors %q, want %q", name, c.Parameters["mirrors"], mirrors)
		}
	}
	for name, write := range map[string]string{"carve-throttled": "50Mi", "carve-unthrottled": "0"} {
		var c storagev1.VolumeAttributesClass
		strict(t, mustFind(t, objs, "VolumeAttributesClass", name), &c)
		if c.Parameters["writeBytesPerSecond"] != write || len(c.Parameters) != 3 {
			t.Errorf("VolumeAttributesClass %s: %v, want writeBytesPerSecond %q and two other limits", name, c.Parameters, write)
		}
	}
	for name, size := range map[string]string{"carve-writecache": "256Mi", "carve-nocache": "0"} {
		var c storagev1.VolumeAttributesClass
		strict(t, mustFind(t, objs, "VolumeAttributesClass", name), &c)
		if c.Parameters["writeCache"] != size || (size != "0") != (c.Parameters["writeCachePVs"] == "@carve-fast") {
			t.Errorf("VolumeAttributesClass %s: %v, want writeCache %q (and, for a cache, its PVs @carve-fast)", name, c.Parameters, size)
		}
	}
}

// checkEncryptedExample: carve-encrypted asks for LUKS2 and names, for
// node-stage and node-expand alike, the example Secret, which holds an
// encryptionKey entry that is only a placeholder, and which the examples'
// kustomization does not apply.
func checkEncryptedExample(t *testing.T, objs []object) {
	var sc storagev1.StorageClass
	strict(t, mustFind(t, objs, "StorageClass", "carve-encrypted"), &sc)
	secrets := loadDir(t, "kubernetes/examples/secret")
	decodeAll(t, secrets)
	var secret corev1.Secret
	strict(t, mustFind(t, secrets, "Secret", "carve-encryption-key"), &secret)
	if sc.Parameters["encryption"] != "luks2" {
		t.Errorf("carve-encrypted: encryption %q, want luks2", sc.Parameters["encryption"])
	}
	for _, step := range []string{"node-stage", "node-expand"} {
		p := "csi.storage.k8s.io/" + step + "-secret-"
		if sc.Parameters[p+"name"] != secret.Name || sc.Parameters[p+"namespace"] != secret.Namespace {
			t.Errorf("carve-encrypted: %s secret %s/%s, want the example's %s/%s", step,
				sc.Parameters[p+"namespace"], sc.Parameters[p+"name"], secret.Namespace, secret.Name)
		}
	}
	if secret.StringData["encryptionKey"] != "REPLACE-ME" {
		t.Errorf("the example Secret's encryptionKey is %d bytes, want the placeholder REPLACE-ME", len(secret.StringData["encryptionKey"]))
	}
	kust, err := os.ReadFile("kubernetes/examples/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(kust, &k); err != nil {
		t.Fatal(err)
	}
	for _, r := range k.Resources {
		if strings.HasPrefix(filepath.Clean(r), "secret") {
			t.Errorf("the examples' kustomization applies %s, the Secret with the placeholder passphrase", r)
		}
	}
}
