// Package deploy checks Carve's Kubernetes manifests (deploy/kubernetes)
// and Helm chart (deploy/helm/carve) without a cluster: every object
// decodes strictly into its Kubernetes type, the CSIDriver, the node
// DaemonSet and the controller Deployment have what Carve needs, every
// flag given to carve exists (read from `carve controller -h` and
// `carve node -h` of ./cmd/carve), every sidecar flag exists in the pinned
// sidecar version, RBAC grants what the code and the sidecars use, and the
// CRD copies match deploy/crds. When kubectl (kustomize) and helm are on
// PATH (or named by CARVE_KUBECTL / CARVE_HELM), the rendered output is
// checked the same way; otherwise those tests skip.
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
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
	p := filepath.Join(dir, "kustomization.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return k
}

// volumeSnapshotClass: the snapshot API is not a dependency of Carve, so
// its one object here is decoded into this copy of its fields.
type volumeSnapshotClass struct {
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
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			strict(t, o, &rbacv1.ClusterRole{})
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			strict(t, o, &rbacv1.ClusterRoleBinding{})
		case "rbac.authorization.k8s.io/v1 Role":
			strict(t, o, &rbacv1.Role{})
		case "rbac.authorization.k8s.io/v1 RoleBinding":
			strict(t, o, &rbacv1.RoleBinding{})
		case "apps/v1 Deployment":
			strict(t, o, &appsv1.Deployment{})
		case "apps/v1 DaemonSet":
			strict(t, o, &appsv1.DaemonSet{})
		case "storage.k8s.io/v1 CSIDriver":
			strict(t, o, &storagev1.CSIDriver{})
		case "storage.k8s.io/v1 StorageClass":
			var sc storagev1.StorageClass
			strict(t, o, &sc)
			checkStorageClass(t, o, &sc)
		case "snapshot.storage.k8s.io/v1 VolumeSnapshotClass":
			var c volumeSnapshotClass
			strict(t, o, &c)
			if c.Driver != driverName || (c.DeletionPolicy != "Delete" && c.DeletionPolicy != "Retain") {
				t.Errorf("%v: driver %q, deletionPolicy %q", o, c.Driver, c.DeletionPolicy)
			}
		case "apiextensions.k8s.io/v1 CustomResourceDefinition":
			var crd struct {
				Spec struct {
					Group string `json:"group"`
					Scope string `json:"scope"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(o.raw, &crd); err != nil {
				t.Errorf("%v: %v", o, err)
			}
			if crd.Spec.Group != "lvm.carve.dev" || crd.Spec.Scope != "Cluster" {
				t.Errorf("%v: group %q scope %q, want lvm.carve.dev, Cluster", o, crd.Spec.Group, crd.Spec.Scope)
			}
		default:
			t.Errorf("%v: unexpected apiVersion/kind %q %q", o, o.APIVersion, o.Kind)
		}
		if o.Name == "" {
			t.Errorf("%v: no metadata.name", o)
		}
	}
}

// Carve's StorageClass parameters (driver/params.go); the CO's
// csi.storage.k8s.io/ ones are passed through.
var carveParams = []string{"volumeGroup", "fsType", "thinPool", "stripes", "stripeSize", "mirrors"}

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

// ---------------------------------------------------------------------------
// Flags

// flagArgs splits container args into flag name -> value ("" for a bare
// boolean); anything that is not --name[=value] is returned in rest.
func flagArgs(args []string) (flags map[string]string, rest []string) {
	flags = map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			rest = append(rest, a)
			continue
		}
		n, v, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		flags[n] = v
	}
	return flags, rest
}

var (
	carveFlagsOnce sync.Once
	carveFlags     map[string]map[string]bool // command -> flag names
	carveFlagsErr  error
)

// carveCommandFlags builds ./cmd/carve and reads the flags of `carve
// controller -h` and `carve node -h`, so the manifests are checked against
// the binary they run.
func carveCommandFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	carveFlagsOnce.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			carveFlagsErr = fmt.Errorf("go not on PATH: %w", err)
			return
		}
		dir, err := os.MkdirTemp("", "carve-deploy-test")
		if err != nil {
			carveFlagsErr = err
			return
		}
		defer func() { _ = os.RemoveAll(dir) }()
		bin := filepath.Join(dir, "carve")
		build := exec.Command(goBin, "build", "-o", bin, "carve.dev/carve/cmd/carve")
		if out, err := build.CombinedOutput(); err != nil {
			carveFlagsErr = fmt.Errorf("go build ./cmd/carve: %v\n%s", err, out)
			return
		}
		flagLine := regexp.MustCompile(`(?m)^  -([a-zA-Z0-9_-]+)`)
		carveFlags = map[string]map[string]bool{}
		for _, cmd := range []string{"controller", "node"} {
			// -h makes the flag set print its usage and fail: the exit
			// status is not the point, the listing is.
			out, _ := exec.Command(bin, cmd, "-h").CombinedOutput()
			set := map[string]bool{}
			for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
				set[m[1]] = true
			}
			if !set["endpoint"] || !set["volume-groups"] {
				carveFlagsErr = fmt.Errorf("carve %s -h lists no --endpoint/--volume-groups:\n%s", cmd, out)
				return
			}
			carveFlags[cmd] = set
		}
	})
	if carveFlagsErr != nil {
		t.Fatal(carveFlagsErr)
	}
	return carveFlags
}

// The flags of the pinned sidecars, from `--help` of csi-provisioner
// v6.3.0, csi-attacher v4.13.0, csi-resizer v2.3.0 and csi-snapshotter
// v8.7.0 (logging flags included).
var (
	commonSidecarFlags = []string{
		"automaxprocs", "csi-address", "feature-gates", "http-endpoint", "kube-api-burst", "kube-api-qps",
		"kubeconfig", "leader-election", "leader-election-labels", "leader-election-lease-duration",
		"leader-election-namespace", "leader-election-renew-deadline", "leader-election-retry-period",
		"log-flush-frequency", "log-json-info-buffer-size", "log-json-split-stream", "log-text-info-buffer-size",
		"log-text-split-stream", "logging-format", "metrics-address", "metrics-path", "retry-interval-max",
		"retry-interval-start", "timeout", "v", "version", "vmodule",
	}
	sidecarFlags = map[string][]string{
		"csi-provisioner": {"capacity-for-immediate-binding", "capacity-ownerref-level", "capacity-poll-interval",
			"capacity-threads", "cloning-protection-threads", "controller-publish-readonly", "default-fstype",
			"enable-capacity", "enable-pprof", "extra-create-metadata", "immediate-topology",
			"kube-api-capacity-burst", "kube-api-capacity-qps", "master", "node-deployment",
			"node-deployment-base-delay", "node-deployment-immediate-binding", "node-deployment-max-delay",
			"prevent-volume-mode-conversion", "snapshot-orphan-sweep-interval", "strict-topology",
			"volume-name-prefix", "volume-name-uuid-length", "worker-threads"},
		"csi-attacher": {"default-fstype", "max-entries", "max-grpc-log-length", "reconcile-sync", "resync",
			"worker-threads"},
		"csi-resizer": {"extra-modify-metadata", "handle-volume-inuse-error", "master", "modify-timeout",
			"resize-timeout", "resync-period", "workers"},
		"csi-snapshotter": {"extra-create-metadata", "groupsnapshot-name-prefix", "groupsnapshot-name-uuid-length",
			"node-deployment", "resync-period", "snapshot-name-prefix", "snapshot-name-uuid-length",
			"worker-threads"},
	}
)

// envRef matches $(VAR) in args, which kubelet expands from the env.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// checkContainerArgs: carve containers use only carve's flags (after the
// subcommand), sidecars only their own, and every $(VAR) is defined.
func checkContainerArgs(t *testing.T, o object, spec *corev1.PodSpec) {
	t.Helper()
	for _, c := range spec.Containers {
		flags, rest := flagArgs(c.Args)
		switch {
		case c.Name == "carve":
			if len(c.Args) == 0 || (c.Args[0] != "controller" && c.Args[0] != "node") {
				t.Errorf("%v: carve's first arg must be its command (controller or node): %q", o, c.Args)
				continue
			}
			if len(rest) != 1 {
				t.Errorf("%v: carve %s: stray arguments %q (give flags as --name=value)", o, c.Args[0], rest[1:])
			}
			known := carveCommandFlags(t)[c.Args[0]]
			for f := range flags {
				if !known[f] {
					t.Errorf("%v: carve %s has no flag --%s", o, c.Args[0], f)
				}
			}
		case sidecarFlags[c.Name] != nil:
			if len(rest) != 0 {
				t.Errorf("%v: %s: stray arguments %q", o, c.Name, rest)
			}
			for f := range flags {
				if !slices.Contains(sidecarFlags[c.Name], f) && !slices.Contains(commonSidecarFlags, f) {
					t.Errorf("%v: %s has no flag --%s", o, c.Name, f)
				}
			}
		default:
			t.Errorf("%v: unexpected container %q", o, c.Name)
		}
		for _, a := range c.Args {
			for _, m := range envRef.FindAllStringSubmatch(a, -1) {
				if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == m[1] }) {
					t.Errorf("%v: %s: arg %q uses $(%s), which its env does not define", o, c.Name, a, m[1])
				}
			}
		}
	}
}

// ---------------------------------------------------------------------------
// The objects' essentials, shared by the raw manifests, kustomize's output
// and Helm's.

func checkCSIDriver(t *testing.T, objs []object) {
	t.Helper()
	var d storagev1.CSIDriver
	strict(t, mustFind(t, objs, "CSIDriver", driverName), &d)
	s := d.Spec
	if s.AttachRequired == nil || !*s.AttachRequired {
		t.Error("CSIDriver: attachRequired must be true (ControllerPublishVolume activates the LV)")
	}
	if s.StorageCapacity == nil || !*s.StorageCapacity {
		t.Error("CSIDriver: storageCapacity must be true (csi-provisioner --enable-capacity)")
	}
	if s.FSGroupPolicy == nil || *s.FSGroupPolicy != storagev1.FileFSGroupPolicy {
		t.Error("CSIDriver: fsGroupPolicy must be File")
	}
	if s.PodInfoOnMount == nil || *s.PodInfoOnMount {
		t.Error("CSIDriver: podInfoOnMount must be false")
	}
	if s.RequiresRepublish == nil || *s.RequiresRepublish {
		t.Error("CSIDriver: requiresRepublish must be false")
	}
	if !slices.Equal(s.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}) {
		t.Errorf("CSIDriver: volumeLifecycleModes %v, want [Persistent]", s.VolumeLifecycleModes)
	}
}

func container(spec *corev1.PodSpec, name string) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	return nil
}

func podVolume(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// mountFrom finds c's mount at mountPath and the pod volume behind it.
func mountFrom(spec *corev1.PodSpec, c *corev1.Container, mountPath string) (*corev1.VolumeMount, *corev1.Volume) {
	for i := range c.VolumeMounts {
		if filepath.Clean(c.VolumeMounts[i].MountPath) == filepath.Clean(mountPath) {
			return &c.VolumeMounts[i], podVolume(spec, c.VolumeMounts[i].Name)
		}
	}
	return nil, nil
}

func hostPathOf(v *corev1.Volume) string {
	if v == nil || v.HostPath == nil {
		return ""
	}
	return filepath.Clean(v.HostPath.Path)
}

// portOf is the port of an address such as ":9808".
func portOf(addr string) string {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return ""
	}
	return addr[i+1:]
}

// checkLiveness: a liveness probe on GET /healthz at --health-address.
func checkLiveness(t *testing.T, what string, c *corev1.Container, flags map[string]string) {
	t.Helper()
	p := c.LivenessProbe
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("%s: carve needs a liveness probe GET /healthz", what)
		return
	}
	want := portOf(flags["health-address"])
	if want == "" {
		t.Errorf("%s: carve has no --health-address for its liveness probe", what)
		return
	}
	got := p.HTTPGet.Port.String()
	for _, cp := range c.Ports {
		if cp.Name == got {
			got = fmt.Sprint(cp.ContainerPort)
		}
	}
	if got != want {
		t.Errorf("%s: liveness probe port %s, --health-address port %s", what, got, want)
	}
	if p.TimeoutSeconds <= 10 {
		t.Errorf("%s: liveness timeoutSeconds %d: /healthz bounds its probe at 10 s, give it longer", what, p.TimeoutSeconds)
	}
}

func checkNodeDaemonSet(t *testing.T, objs []object, kubelet string) {
	t.Helper()
	o := mustFind(t, objs, "DaemonSet", node)
	var ds appsv1.DaemonSet
	strict(t, o, &ds)
	spec := &ds.Spec.Template.Spec
	checkContainerArgs(t, o, spec)
	if spec.ServiceAccountName != node {
		t.Errorf("%v: serviceAccountName %q", o, spec.ServiceAccountName)
	}
	c := container(spec, "carve")
	if c == nil {
		t.Fatalf("%v: no carve container", o)
	}
	if len(c.Args) == 0 || c.Args[0] != "node" {
		t.Fatalf("%v: carve must run `carve node`: %q", o, c.Args)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("%v: carve node must be privileged (lvm2, mounts)", o)
	}
	flags, _ := flagArgs(c.Args)

	// --node-id is the Kubernetes node name.
	if flags["node-id"] != "$(NODE_NAME)" {
		t.Errorf("%v: --node-id=%q, want $(NODE_NAME)", o, flags["node-id"])
	}
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && (e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "spec.nodeName") {
			t.Errorf("%v: NODE_NAME must come from spec.nodeName", o)
		}
	}
	if flags["volume-groups"] == "" {
		t.Errorf("%v: carve node needs --volume-groups", o)
	}

	// kubelet's directory, with Bidirectional propagation at the same
	// path: staging and target paths come from kubelet as host paths.
	m, v := mountFrom(spec, c, kubelet)
	if m == nil || hostPathOf(v) != kubelet {
		t.Errorf("%v: %s must be mounted from the host at the same path", o, kubelet)
	} else if m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationBidirectional {
		t.Errorf("%v: %s must have mountPropagation Bidirectional", o, kubelet)
	}

	// The CSI socket: in the pod at --endpoint, on the host (what kubelet
	// dials) at --kubelet-csi-path, in kubelet's plugins directory.
	endpoint := strings.TrimPrefix(flags["endpoint"], "unix://")
	if endpoint == "" {
		t.Errorf("%v: no --endpoint", o)
	} else {
		_, pv := mountFrom(spec, c, filepath.Dir(endpoint))
		hostSock := filepath.Join(hostPathOf(pv), filepath.Base(endpoint))
		want := filepath.Join(kubelet, "plugins", driverName, "csi.sock")
		if hostPathOf(pv) == "" || hostSock != want {
			t.Errorf("%v: --endpoint %s is %q on the host, want %s", o, endpoint, hostSock, want)
		}
		kp := flags["kubelet-csi-path"]
		if kp == "" {
			kp = endpoint
		}
		if kp != want {
			t.Errorf("%v: kubelet is told the socket is %q (--kubelet-csi-path), but it is %s", o, kp, want)
		}
	}
	// The registration socket, in kubelet's plugins_registry.
	reg := flags["registration-socket"]
	if reg == "" {
		reg = filepath.Join(kubeletDir, "plugins_registry", driverName+"-reg.sock") // carve's default
	}
	if _, rv := mountFrom(spec, c, filepath.Dir(reg)); hostPathOf(rv) != filepath.Join(kubelet, "plugins_registry") {
		t.Errorf("%v: --registration-socket %s is not in the host's %s/plugins_registry", o, reg, kubelet)
	}

	// The host's devices, kernel and LVM state.
	for _, p := range []string{"/dev", "/sys", "/lib/modules", "/etc/lvm", "/run/lvm", "/run/lock/lvm"} {
		m, v := mountFrom(spec, c, p)
		if m == nil || hostPathOf(v) != p {
			t.Errorf("%v: the host's %s must be mounted at %s", o, p, p)
			continue
		}
		if p == "/lib/modules" && !m.ReadOnly {
			t.Errorf("%v: /lib/modules should be read-only", o)
		}
	}
	checkLiveness(t, o.String(), c, flags)
}

func checkControllerDeployment(t *testing.T, objs []object) {
	t.Helper()
	o := mustFind(t, objs, "Deployment", controller)
	var d appsv1.Deployment
	strict(t, o, &d)
	spec := &d.Spec.Template.Spec
	checkContainerArgs(t, o, spec)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("%v: want 1 replica", o)
	}
	if spec.ServiceAccountName != controller {
		t.Errorf("%v: serviceAccountName %q", o, spec.ServiceAccountName)
	}
	c := container(spec, "carve")
	if c == nil {
		t.Fatalf("%v: no carve container", o)
	}
	flags, _ := flagArgs(c.Args)
	if len(c.Args) == 0 || c.Args[0] != "controller" {
		t.Errorf("%v: carve must run `carve controller`: %q", o, c.Args)
	}
	if flags["endpoint"] != "unix://"+csiSockPath {
		t.Errorf("%v: carve controller --endpoint=%q, want unix://%s", o, flags["endpoint"], csiSockPath)
	}
	if _, ok := flags["leader-elect"]; !ok {
		t.Errorf("%v: carve controller needs --leader-elect", o)
	}
	if flags["volume-groups"] == "" {
		t.Errorf("%v: carve controller needs --volume-groups", o)
	}
	checkLiveness(t, o.String(), c, flags)
	if m, _ := mountFrom(spec, c, filepath.Dir(csiSockPath)); m == nil {
		t.Errorf("%v: carve does not mount %s", o, filepath.Dir(csiSockPath))
	}

	for name := range sidecarFlags {
		s := container(spec, name)
		if s == nil {
			t.Errorf("%v: no %s sidecar", o, name)
			continue
		}
		f, _ := flagArgs(s.Args)
		if f["csi-address"] != csiSockPath {
			t.Errorf("%v: %s --csi-address=%q, want %s", o, name, f["csi-address"], csiSockPath)
		}
		if v, ok := f["leader-election"]; !ok || (v != "" && v != "true") {
			t.Errorf("%v: %s needs --leader-election", o, name)
		}
		if m, _ := mountFrom(spec, s, filepath.Dir(csiSockPath)); m == nil || m.Name != "socket-dir" {
			t.Errorf("%v: %s does not share the socket dir", o, name)
		}
	}
	if v := podVolume(spec, "socket-dir"); v == nil || v.EmptyDir == nil {
		t.Errorf("%v: socket-dir must be an emptyDir", o)
	}

	p := container(spec, "csi-provisioner")
	if p == nil {
		return
	}
	f, _ := flagArgs(p.Args)
	for _, want := range []string{"enable-capacity", "strict-topology", "extra-create-metadata"} {
		if v, ok := f[want]; !ok || (v != "" && v != "true") {
			t.Errorf("%v: csi-provisioner needs --%s", o, want)
		}
	}
	if !slices.Contains(strings.Split(f["feature-gates"], ","), "Topology=true") {
		t.Errorf("%v: csi-provisioner needs --feature-gates=Topology=true, has %q", o, f["feature-gates"])
	}
	// Capacity objects are owned by the Deployment: Pod -> ReplicaSet ->
	// Deployment, and the provisioner finds the Pod from its env.
	if f["capacity-ownerref-level"] != "2" {
		t.Errorf("%v: csi-provisioner --capacity-ownerref-level=%q, want 2 (owner: the Deployment)", o, f["capacity-ownerref-level"])
	}
	env := map[string]string{}
	for _, e := range p.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["NAMESPACE"] != "metadata.namespace" || env["POD_NAME"] != "metadata.name" {
		t.Errorf("%v: csi-provisioner --enable-capacity needs NAMESPACE and POD_NAME from the downward API, has %v", o, env)
	}
}

// ---------------------------------------------------------------------------
// RBAC

// need is one permission a component uses.
type need struct {
	sa, group, resource string
	namespaced          bool // the resource lives in the pod's namespace
	verbs               []string
	why                 string
}

// needs: what each ServiceAccount's processes call. carve's entries come
// from driver/cluster/backend (controller: direct client), and
// driver/cluster/agent (node: controller-runtime's cached client, hence
// list/watch for every Get); the sidecars' from their upstream rbac.yaml.
var needs = []need{
	{controller, "lvm.carve.dev", "logicalvolumes", false, []string{"get", "list", "create", "patch", "delete"}, "backend: volumes, publish"},
	{controller, "lvm.carve.dev", "logicalvolumesnapshots", false, []string{"get", "list", "create", "delete"}, "backend: snapshots"},
	{controller, "lvm.carve.dev", "nodestorages", false, []string{"get", "list"}, "backend: capacity; /healthz"},
	{controller, "coordination.k8s.io", "leases", true, []string{"get", "create", "update"}, "leader election (carve and sidecars)"},
	{controller, "", "events", true, []string{"create", "patch"}, "leader election events"},
	{controller, "", "persistentvolumes", false, []string{"get", "list", "watch", "create", "patch", "delete"}, "csi-provisioner"},
	{controller, "", "persistentvolumeclaims", false, []string{"get", "list", "watch", "update"}, "csi-provisioner"},
	{controller, "storage.k8s.io", "storageclasses", false, []string{"get", "list", "watch"}, "csi-provisioner"},
	{controller, "", "events", false, []string{"create", "patch"}, "sidecars' events on PVCs"},
	{controller, "storage.k8s.io", "csinodes", false, []string{"get", "list", "watch"}, "csi-provisioner, csi-attacher"},
	{controller, "", "nodes", false, []string{"get", "list", "watch"}, "csi-provisioner topology"},
	{controller, "storage.k8s.io", "volumeattachments", false, []string{"get", "list", "watch", "patch"}, "csi-attacher"},
	{controller, "storage.k8s.io", "volumeattachments/status", false, []string{"patch"}, "csi-attacher"},
	{controller, "snapshot.storage.k8s.io", "volumesnapshots", false, []string{"get", "list", "watch", "update"}, "csi-provisioner restore"},
	{controller, "snapshot.storage.k8s.io", "volumesnapshotcontents", false, []string{"get", "list", "watch", "update", "patch"}, "csi-snapshotter"},
	{controller, "snapshot.storage.k8s.io", "volumesnapshotcontents/status", false, []string{"update", "patch"}, "csi-snapshotter"},
	{controller, "snapshot.storage.k8s.io", "volumesnapshotclasses", false, []string{"get", "list", "watch"}, "csi-snapshotter"},
	{controller, "storage.k8s.io", "csistoragecapacities", true, []string{"get", "list", "watch", "create", "update", "patch", "delete"}, "csi-provisioner --enable-capacity"},
	{controller, "", "pods", true, []string{"get"}, "csi-provisioner capacity owner lookup"},
	{controller, "apps", "replicasets", true, []string{"get"}, "csi-provisioner capacity owner lookup"},
	{controller, "", "persistentvolumeclaims/status", false, []string{"patch"}, "csi-resizer"},
	{controller, "", "pods", false, []string{"get", "list", "watch"}, "csi-resizer"},
	{controller, "storage.k8s.io", "volumeattributesclasses", false, []string{"get", "list", "watch"}, "csi-resizer"},
	{node, "lvm.carve.dev", "logicalvolumes", false, []string{"get", "list", "watch", "update"}, "agent: reconcile, finalizers"},
	{node, "lvm.carve.dev", "logicalvolumes/status", false, []string{"update"}, "agent: status"},
	{node, "lvm.carve.dev", "logicalvolumesnapshots", false, []string{"get", "list", "watch", "update"}, "agent: reconcile, finalizers"},
	{node, "lvm.carve.dev", "logicalvolumesnapshots/status", false, []string{"update"}, "agent: status"},
	{node, "lvm.carve.dev", "nodestorages", false, []string{"get", "list", "watch", "create"}, "agent: storage report (cached Get)"},
	{node, "lvm.carve.dev", "nodestorages/status", false, []string{"update"}, "agent: storage report"},
}

// denied: what a ServiceAccount must not be able to do.
var denied = []need{
	{node, "lvm.carve.dev", "logicalvolumes", false, []string{"create", "delete"}, "only the controller creates and deletes volumes"},
	{node, "lvm.carve.dev", "logicalvolumesnapshots", false, []string{"create", "delete"}, "only the controller creates and deletes snapshots"},
	{node, "lvm.carve.dev", "nodestorages", false, []string{"delete"}, "a node only reports"},
	{controller, "lvm.carve.dev", "logicalvolumes/status", false, []string{"update", "patch"}, "status is the agent's"},
	{controller, "", "secrets", true, []string{"get", "list"}, "no secrets are used"},
	{node, "", "secrets", true, []string{"get", "list"}, "no secrets are used"},
}

// grants is what each ServiceAccount may do, from the bindings.
type grant struct {
	rule      rbacv1.PolicyRule
	namespace string // "" for cluster-wide (ClusterRoleBinding)
}

func collectGrants(t *testing.T, objs []object, ns string) map[string][]grant {
	t.Helper()
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	roles := map[string][]rbacv1.PolicyRule{} // namespace/name
	for _, o := range objs {
		switch o.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			strict(t, o, &r)
			clusterRoles[r.Name] = r.Rules
		case "Role":
			var r rbacv1.Role
			strict(t, o, &r)
			roles[r.Namespace+"/"+r.Name] = r.Rules
		}
	}
	out := map[string][]grant{}
	add := func(o object, subjects []rbacv1.Subject, rules []rbacv1.PolicyRule, ok bool, scope string) {
		if !ok {
			t.Errorf("%v: binds a role that is not in the manifests", o)
		}
		for _, s := range subjects {
			if s.Kind != "ServiceAccount" || s.Namespace != ns {
				t.Errorf("%v: subject %s %s/%s, want a ServiceAccount in %s", o, s.Kind, s.Namespace, s.Name, ns)
				continue
			}
			for _, r := range rules {
				out[s.Name] = append(out[s.Name], grant{r, scope})
			}
		}
	}
	for _, o := range objs {
		switch o.Kind {
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			strict(t, o, &b)
			rules, ok := clusterRoles[b.RoleRef.Name]
			add(o, b.Subjects, rules, ok && b.RoleRef.Kind == "ClusterRole", "")
		case "RoleBinding":
			var b rbacv1.RoleBinding
			strict(t, o, &b)
			var rules []rbacv1.PolicyRule
			ok := false
			if b.RoleRef.Kind == "Role" {
				rules, ok = roles[b.Namespace+"/"+b.RoleRef.Name]
			} else {
				rules, ok = clusterRoles[b.RoleRef.Name]
			}
			add(o, b.Subjects, rules, ok, b.Namespace)
		}
	}
	return out
}

func allows(gs []grant, group, resource, verb string, namespaced bool, ns string) bool {
	for _, g := range gs {
		if g.namespace != "" && (!namespaced || g.namespace != ns) {
			continue
		}
		r := g.rule
		if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) && len(r.ResourceNames) == 0 {
			return true
		}
	}
	return false
}

// gr names a resource of a group for messages ("pods" of the core group).
func gr(resource, group string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

func checkRBAC(t *testing.T, objs []object, ns string) {
	t.Helper()
	for _, sa := range []string{controller, node} {
		if o, ok := find(objs, "ServiceAccount", sa); !ok || o.Namespace != ns {
			t.Errorf("no ServiceAccount %s in %s", sa, ns)
		}
	}
	grants := collectGrants(t, objs, ns)
	for _, n := range needs {
		for _, v := range n.verbs {
			if !allows(grants[n.sa], n.group, n.resource, v, n.namespaced, ns) {
				t.Errorf("RBAC: %s cannot %s %s (%s)", n.sa, v, gr(n.resource, n.group), n.why)
			}
		}
	}
	for _, n := range denied {
		for _, v := range n.verbs {
			if allows(grants[n.sa], n.group, n.resource, v, n.namespaced, ns) {
				t.Errorf("RBAC: %s may %s %s, it should not: %s", n.sa, v, gr(n.resource, n.group), n.why)
			}
		}
	}
	for sa, gs := range grants {
		for _, g := range gs {
			if slices.Contains(g.rule.Verbs, "*") || slices.Contains(g.rule.Resources, "*") || slices.Contains(g.rule.APIGroups, "*") {
				t.Errorf("RBAC: %s has a wildcard rule %+v", sa, g.rule)
			}
		}
	}
}

// checkImages: no registry host in any image (they are placeholders set
// by kustomize images: or Helm's imageRegistry).
func checkImages(t *testing.T, objs []object, allowRegistry bool) []string {
	t.Helper()
	var images []string
	for _, o := range objs {
		var spec *corev1.PodSpec
		switch o.Kind {
		case "Deployment":
			var d appsv1.Deployment
			strict(t, o, &d)
			spec = &d.Spec.Template.Spec
		case "DaemonSet":
			var d appsv1.DaemonSet
			strict(t, o, &d)
			spec = &d.Spec.Template.Spec
		default:
			continue
		}
		for _, c := range spec.Containers {
			images = append(images, c.Image)
			first, _, hasSlash := strings.Cut(c.Image, "/")
			if !allowRegistry && hasSlash && (strings.ContainsAny(first, ".:") || first == "localhost") {
				t.Errorf("%v: image %q names a registry; use a placeholder and an override", o, c.Image)
			}
		}
	}
	return images
}

// checkAll runs every object check.
func checkAll(t *testing.T, objs []object, ns, kubelet string) {
	t.Helper()
	decodeAll(t, objs)
	checkCSIDriver(t, objs)
	checkNodeDaemonSet(t, objs, kubelet)
	checkControllerDeployment(t, objs)
	checkRBAC(t, objs, ns)
}

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
		var spec *corev1.PodSpec
		switch o.Kind {
		case "Deployment":
			var d appsv1.Deployment
			strict(t, o, &d)
			spec = &d.Spec.Template.Spec
		case "DaemonSet":
			var d appsv1.DaemonSet
			strict(t, o, &d)
			spec = &d.Spec.Template.Spec
		default:
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
	mustFind(t, objs, "VolumeSnapshotClass", "carve")
}

// ---------------------------------------------------------------------------
// Rendered output: kustomize (kubectl kustomize) and Helm

// tool finds a binary from env (CARVE_KUBECTL, CARVE_HELM) or PATH.
func tool(t *testing.T, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not on PATH (set %s): rendering not checked", name, env)
	}
	return p
}

func run(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func TestKustomizeBuild(t *testing.T) {
	kubectl := tool(t, "CARVE_KUBECTL", "kubectl")
	// The base, and the example overlay (other VGs, images, nodeSelector).
	for _, dir := range []string{"kubernetes/base", "kubernetes/overlays/example"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			objs := parseDocs(t, dir, run(t, kubectl, "kustomize", dir))
			checkAll(t, objs, namespace, kubeletDir)
			for _, kind := range []string{"CustomResourceDefinition", "Namespace", "ConfigMap"} {
				if !slices.ContainsFunc(objs, func(o object) bool { return o.Kind == kind }) {
					t.Errorf("no %s in the output", kind)
				}
			}
			for _, o := range objs {
				if o.Kind != "ServiceAccount" && o.Kind != "Deployment" && o.Kind != "DaemonSet" &&
					o.Kind != "Role" && o.Kind != "RoleBinding" && o.Kind != "ConfigMap" {
					continue
				}
				if o.Namespace != namespace {
					t.Errorf("%v: namespace %q", o, o.Namespace)
				}
			}
		})
	}
	t.Run("examples", func(t *testing.T) {
		decodeAll(t, parseDocs(t, "examples", run(t, kubectl, "kustomize", "kubernetes/examples")))
	})
}

func helmTemplate(t *testing.T, helm string, args ...string) []object {
	t.Helper()
	a := append([]string{"template", "carve", "helm/carve", "--namespace", namespace}, args...)
	return parseDocs(t, "helm template", run(t, helm, a...))
}

func TestHelmChart(t *testing.T) {
	helm := tool(t, "CARVE_HELM", "helm")
	run(t, helm, "lint", "--strict", "helm/carve")

	t.Run("defaults", func(t *testing.T) {
		objs := helmTemplate(t, helm, "--include-crds")
		checkAll(t, objs, namespace, kubeletDir)
		checkImages(t, objs, false)
		examples := loadDir(t, "kubernetes/examples")
		for _, o := range examples {
			if _, ok := find(objs, o.Kind, o.Name); !ok {
				t.Errorf("the chart has no %s %s (deploy/kubernetes/examples has)", o.Kind, o.Name)
			}
		}
		// The chart mirrors the base: same RBAC rules.
		base := baseObjects(t)
		for _, kind := range []string{"ClusterRole", "Role"} {
			for _, b := range base {
				if b.Kind != kind {
					continue
				}
				h, ok := find(objs, kind, b.Name)
				if !ok {
					t.Errorf("the chart has no %s %s", kind, b.Name)
					continue
				}
				var br, hr struct {
					Rules []rbacv1.PolicyRule `json:"rules"`
				}
				_ = yaml.Unmarshal(b.raw, &br)
				_ = yaml.Unmarshal(h.raw, &hr)
				if fmt.Sprint(br.Rules) != fmt.Sprint(hr.Rules) {
					t.Errorf("%s %s: the chart's rules differ from the base's\nbase:  %v\nchart: %v", kind, b.Name, br.Rules, hr.Rules)
				}
			}
		}
	})

	t.Run("values", func(t *testing.T) {
		objs := helmTemplate(t, helm,
			"--set", "imageRegistry=mirror/sig",
			"--set", "volumeGroups={nvme,ssd}",
			"--set", "thinOverprovisionRatio=2.5",
			"--set", "node.maxVolumes=20",
			"--set", "kubeletDir=/var/lib/k0s/kubelet",
			"--set-string", `node.nodeSelector.lvm\.carve\.dev/storage-node=true`)
		checkAll(t, objs, namespace, "/var/lib/k0s/kubelet")
		var ds appsv1.DaemonSet
		strict(t, mustFind(t, objs, "DaemonSet", node), &ds)
		c := ds.Spec.Template.Spec.Containers[0]
		f, _ := flagArgs(c.Args)
		if f["volume-groups"] != "nvme,ssd" || f["thin-overprovision-ratio"] != "2.5" || f["max-volumes"] != "20" {
			t.Errorf("values not passed to carve node: %q", c.Args)
		}
		if c.Image != "mirror/sig/carve:latest" {
			t.Errorf("imageRegistry not applied: %q", c.Image)
		}
		if ds.Spec.Template.Spec.NodeSelector["lvm.carve.dev/storage-node"] != "true" {
			t.Errorf("nodeSelector not applied: %v", ds.Spec.Template.Spec.NodeSelector)
		}
	})

	t.Run("snapshots off", func(t *testing.T) {
		objs := helmTemplate(t, helm, "--set", "snapshots.enabled=false")
		if _, ok := find(objs, "VolumeSnapshotClass", "carve"); ok {
			t.Error("VolumeSnapshotClass rendered with snapshots.enabled=false")
		}
		var d appsv1.Deployment
		strict(t, mustFind(t, objs, "Deployment", controller), &d)
		if container(&d.Spec.Template.Spec, "csi-snapshotter") != nil {
			t.Error("csi-snapshotter rendered with snapshots.enabled=false")
		}
	})

	t.Run("refused values", func(t *testing.T) {
		for _, set := range []string{"volumeGroups=null", "controller.replicas=2,controller.leaderElection=false"} {
			cmd := exec.Command(helm, "template", "carve", "helm/carve", "--set", set)
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Errorf("helm template --set %s rendered; want a failure\n%s", set, out)
			}
		}
	})
}
