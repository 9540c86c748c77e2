package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"
)

// ---------------------------------------------------------------------------
// Loading

// object is one YAML document of a manifest.
type object struct {
	src        string // file (and document index) for messages
	raw        []byte // the document as JSON
	APIVersion string
	Kind       string
	Name       string
	Namespace  string
}

func (o object) String() string {
	return fmt.Sprintf("%s %s/%s (%s)", o.Kind, o.Namespace, o.Name, o.src)
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// parseDocs splits a multi-document YAML stream; documents that are empty
// or only comments are dropped.
func parseDocs(t *testing.T, src string, data []byte) []object {
	t.Helper()
	var out []object
	for i, d := range docSep.Split(string(data), -1) {
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Errorf("%s: document %d: %v", src, i, err)
			continue
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(j, &meta); err != nil {
			t.Errorf("%s: document %d: %v", src, i, err)
			continue
		}
		where := src
		if i > 0 {
			where = fmt.Sprintf("%s#%d", src, i)
		}
		out = append(out, object{src: where, raw: j, APIVersion: meta.APIVersion, Kind: meta.Kind,
			Name: meta.Metadata.Name, Namespace: meta.Metadata.Namespace})
	}
	return out
}

// manifestFiles lists every YAML file under deploy/kubernetes.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("kubernetes", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests under deploy/kubernetes")
	}
	return files
}

func isKustomization(p string) bool { return filepath.Base(p) == "kustomization.yaml" }

// loadDir returns the objects of every non-kustomization YAML file in dir
// (one level, as a kustomization lists them).
func loadDir(t *testing.T, dir string) []object {
	t.Helper()
	var out []object
	for _, f := range manifestFiles(t) {
		if filepath.Dir(f) == dir && !isKustomization(f) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, parseDocs(t, f, data)...)
		}
	}
	return out
}

// strict decodes o into v, refusing unknown and duplicate fields.
func strict(t *testing.T, o object, v any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(o.raw, v); err != nil {
		t.Errorf("%v: %v", o, err)
	}
}

// kustomization is the part of kustomize's Kustomization these manifests
// use; decoding strictly catches misspelt fields.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources,omitempty"`
	Labels     []struct {
		Pairs            map[string]string `json:"pairs"`
		IncludeSelectors bool              `json:"includeSelectors,omitempty"`
		IncludeTemplates bool              `json:"includeTemplates,omitempty"`
	} `json:"labels,omitempty"`
	ConfigMapGenerator []struct {
		Name     string   `json:"name"`
		Behavior string   `json:"behavior,omitempty"`
		Literals []string `json:"literals,omitempty"`
		Files    []string `json:"files,omitempty"`
		Options  *struct {
			DisableNameSuffixHash bool              `json:"disableNameSuffixHash,omitempty"`
			Labels                map[string]string `json:"labels,omitempty"`
		} `json:"options,omitempty"`
	} `json:"configMapGenerator,omitempty"`
	Images []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
	Patches []struct {
		Path   string            `json:"path,omitempty"`
		Patch  string            `json:"patch,omitempty"`
		Target map[string]string `json:"target,omitempty"`
	} `json:"patches,omitempty"`
}

func readKustomization(t *testing.T, dir string) kustomization {
	t.Helper()
	var k kustomization
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &k)
	return k
}

// readYAML decodes file p into v, refusing unknown and duplicate fields.
func readYAML(t *testing.T, p string, v any) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
}

// carveResource is one of Carve's CRDs (deploy/crds): its plural,
// whether it serves the status subresource, whether every version
// requires spec.nodeName, and whether it is a tenant's (namespaced).
type carveResource struct {
	plural   string
	status   bool
	nodeName bool
	tenant   bool
}

// tenantResources are Carve's namespaced resources, which tenants create
// in their own namespaces (rbac-tenant.yaml); every other is cluster-wide.
var tenantResources = []string{"volumemoves"}

// carveResources reads the resources of deploy/crds, as make generate
// wrote them.
func carveResources(t *testing.T) []carveResource {
	t.Helper()
	files, err := filepath.Glob("crds/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in deploy/crds (%v)", err)
	}
	var out []carveResource
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Group string `json:"group"`
				Scope string `json:"scope"`
				Names struct {
					Plural string `json:"plural"`
				} `json:"names"`
				Versions []struct {
					Subresources struct {
						Status *struct{} `json:"status"`
					} `json:"subresources"`
					Schema struct {
						OpenAPIV3Schema struct {
							Properties struct {
								Spec struct {
									Properties map[string]any `json:"properties"`
									Required   []string       `json:"required"`
								} `json:"spec"`
							} `json:"properties"`
						} `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if crd.Spec.Group != driverName || crd.Spec.Names.Plural == "" {
			t.Fatalf("%s: group %q, plural %q", f, crd.Spec.Group, crd.Spec.Names.Plural)
		}
		r := carveResource{plural: crd.Spec.Names.Plural, nodeName: len(crd.Spec.Versions) > 0, tenant: crd.Spec.Scope == "Namespaced"}
		for _, v := range crd.Spec.Versions {
			r.status = r.status || v.Subresources.Status != nil
			spec := v.Schema.OpenAPIV3Schema.Properties.Spec
			r.nodeName = r.nodeName && spec.Properties["nodeName"] != nil && slices.Contains(spec.Required, "nodeName")
		}
		out = append(out, r)
	}
	return out
}

// snapshotClass: the snapshot API is not a dependency of Carve, so its
// classes here (VolumeSnapshotClass, VolumeGroupSnapshotClass: the same
// fields) are decoded into this copy of their fields.
type snapshotClass struct {
	APIVersion     string            `json:"apiVersion"`
	Kind           string            `json:"kind"`
	Metadata       map[string]any    `json:"metadata"`
	Driver         string            `json:"driver"`
	DeletionPolicy string            `json:"deletionPolicy"`
	Parameters     map[string]string `json:"parameters,omitempty"`
}

// decodeAll decodes every object into its type and fails on kinds the
// deployment is not expected to hold.
func decodeAll(t *testing.T, objs []object) {
	t.Helper()
	for _, o := range objs {
		switch o.APIVersion + " " + o.Kind {
		case "v1 Namespace":
			strict(t, o, &corev1.Namespace{})
		case "v1 ServiceAccount":
			strict(t, o, &corev1.ServiceAccount{})
		case "v1 ConfigMap":
			strict(t, o, &corev1.ConfigMap{})
		case "v1 Service":
			strict(t, o, &corev1.Service{})
		case "monitoring.coreos.com/v1 ServiceMonitor", "monitoring.coreos.com/v1 PodMonitor":
			strict(t, o, &monitor{})
		case "monitoring.coreos.com/v1 PrometheusRule":
			strict(t, o, &prometheusRuleObject{})
		case "v1 Secret": // the encrypted class's example, with a placeholder
			strict(t, o, &corev1.Secret{})
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			strict(t, o, &rbacv1.ClusterRole{})
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			strict(t, o, &rbacv1.ClusterRoleBinding{})
		case "rbac.authorization.k8s.io/v1 Role":
			strict(t, o, &rbacv1.Role{})
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			strict(t, o, &rbacv1.RoleBinding{})
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
			strict(t, o, &admissionregistrationv1.ValidatingAdmissionPolicy{})
		case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
			strict(t, o, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{})
		case "apps/v1 Deployment":
			strict(t, o, &appsv1.Deployment{})
		case "apps/v1 DaemonSet":
			strict(t, o, &appsv1.DaemonSet{})
		case "policy/v1 PodDisruptionBudget":
			strict(t, o, &policyv1.PodDisruptionBudget{})
		case "storage.k8s.io/v1 CSIDriver":
			strict(t, o, &storagev1.CSIDriver{})
		case "storage.k8s.io/v1 StorageClass":
			var sc storagev1.StorageClass
			strict(t, o, &sc)
			checkStorageClass(t, o, &sc)
		case "storage.k8s.io/v1 VolumeAttributesClass":
			var c storagev1.VolumeAttributesClass
			strict(t, o, &c)
			checkAttributesClass(t, o, &c)
		case "snapshot.storage.k8s.io/v1 VolumeSnapshotClass", "groupsnapshot.storage.k8s.io/v1 VolumeGroupSnapshotClass":
			var c snapshotClass
			strict(t, o, &c)
			if c.Driver != driverName || (c.DeletionPolicy != "Delete" && c.DeletionPolicy != "Retain") {
				t.Errorf("%v: driver %q, deletionPolicy %q", o, c.Driver, c.DeletionPolicy)
			}
		case "apiextensions.k8s.io/v1 CustomResourceDefinition":
			var crd struct {
				Spec struct {
					Group string `json:"group"`
					Scope string `json:"scope"`
					Names struct {
						Plural string `json:"plural"`
					} `json:"names"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(o.raw, &crd); err != nil {
				t.Errorf("%v: %v", o, err)
			}
			scope := "Cluster"
			if slices.Contains(tenantResources, crd.Spec.Names.Plural) {
				scope = "Namespaced"
			}
			if crd.Spec.Group != "lvm.carve.dev" || crd.Spec.Scope != scope {
				t.Errorf("%v: group %q scope %q, want lvm.carve.dev, %s", o, crd.Spec.Group, crd.Spec.Scope, scope)
			}
		default:
			t.Errorf("%v: unexpected apiVersion/kind %q %q", o, o.APIVersion, o.Kind)
		}
		if o.Name == "" {
			t.Errorf("%v: no metadata.name", o)
		}
	}
}

// Carve's StorageClass parameters (driver/csi/params.go); the CO's
// csi.storage.k8s.io/ ones are passed through.
var carveParams = []string{"volumeGroup", "fsType", "thinPool", "stripes", "stripeSize", "mirrors", "encryption",
	"readBytesPerSecond", "writeBytesPerSecond", "readIOPS", "writeIOPS", "writeCache", "writeCachePVs"}

func checkStorageClass(t *testing.T, o object, sc *storagev1.StorageClass) {
	t.Helper()
	if sc.Provisioner != driverName {
		t.Errorf("%v: provisioner %q", o, sc.Provisioner)
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("%v: volumeBindingMode must be WaitForFirstConsumer (a volume lives on one node)", o)
	}
	if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		t.Errorf("%v: allowVolumeExpansion must be true", o)
	}
	for k := range sc.Parameters {
		if !strings.HasPrefix(k, "csi.storage.k8s.io/") && !slices.Contains(carveParams, k) {
			t.Errorf("%v: parameter %q is not Carve's (%v): CreateVolume would refuse it", o, k, carveParams)
		}
	}
}

// Carve's mutable parameters (driver/csi/params.go): the only keys a
// VolumeAttributesClass may hold.
var carveMutableParams = []string{"mirrors", "readBytesPerSecond", "writeBytesPerSecond", "readIOPS", "writeIOPS", "writeCache", "writeCachePVs"}

func checkAttributesClass(t *testing.T, o object, c *storagev1.VolumeAttributesClass) {
	t.Helper()
	if c.DriverName != driverName {
		t.Errorf("%v: driverName %q", o, c.DriverName)
	}
	for k := range c.Parameters {
		if !slices.Contains(carveMutableParams, k) {
			t.Errorf("%v: parameter %q is not one of Carve's mutable ones (%v): ControllerModifyVolume would refuse it", o, k, carveMutableParams)
		}
	}
}

func find(objs []object, kind, name string) (object, bool) {
	for _, o := range objs {
		if o.Kind == kind && o.Name == name {
			return o, true
		}
	}
	return object{}, false
}

func mustFind(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	o, ok := find(objs, kind, name)
	if !ok {
		t.Fatalf("no %s %s", kind, name)
	}
	return o
}
