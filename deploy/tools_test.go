package deploy

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/yaml"

	"carve.dev/carve/driver/disks"
)

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
			if dir == "kubernetes/base" {
				checkTestedImages(t, objs)
			}
			for _, kind := range []string{"CustomResourceDefinition", "Namespace", "ConfigMap"} {
				if !slices.ContainsFunc(objs, func(o object) bool { return o.Kind == kind }) {
					t.Errorf("no %s in the output", kind)
				}
			}
			if !checkControllerPDB(t, objs) {
				t.Errorf("no PodDisruptionBudget for %s in the output", controller)
			}
			for _, o := range objs {
				if o.Kind != "ServiceAccount" && o.Kind != "Deployment" && o.Kind != "DaemonSet" &&
					o.Kind != "Role" && o.Kind != "RoleBinding" && o.Kind != "ConfigMap" && o.Kind != "PodDisruptionBudget" {
					continue
				}
				if o.Namespace != namespace {
					t.Errorf("%v: namespace %q", o, o.Namespace)
				}
			}
		})
	}
	t.Run("examples", func(t *testing.T) {
		objs := parseDocs(t, "examples", run(t, kubectl, "kustomize", "kubernetes/examples"))
		decodeAll(t, objs)
		if got := attributesClasses(t, objs); len(got) != 0 {
			t.Errorf("the examples apply VolumeAttributesClasses %v; they are opt-in (%s)", slices.Sorted(maps.Keys(got)), optInClasses)
		}
	})
	t.Run("opt-in classes", func(t *testing.T) {
		objs := parseDocs(t, optInClasses, run(t, kubectl, "kustomize", optInClasses))
		decodeAll(t, objs)
		sameClasses(t, optInClasses, attributesClasses(t, objs), attributesClasses(t, loadDir(t, optInClasses)))
	})
	// Monitoring, opt-in, both ways: the rendered objects in the base's
	// namespace, the dashboard's ConfigMap under its own name.
	for dir, want := range map[string]map[string]int{
		monitoringDir:                 {"Service": 2, "ServiceMonitor": 1, "PrometheusRule": 1, "ConfigMap": 1},
		monitoringDir + "/podmonitor": {"PodMonitor": 1, "PrometheusRule": 1, "ConfigMap": 1},
	} {
		t.Run(dir, func(t *testing.T) {
			objs := parseDocs(t, dir, run(t, kubectl, "kustomize", dir))
			decodeAll(t, objs)
			if found := checkMonitoring(t, objs, baseObjects(t)); !maps.Equal(found, want) {
				t.Errorf("kinds %v, want %v", found, want)
			}
			for _, o := range objs {
				if o.Namespace != namespace {
					t.Errorf("%v: namespace %q", o, o.Namespace)
				}
			}
			mustFind(t, objs, "ConfigMap", "carve-dashboard")
		})
	}
	// The e2e's scenarios and the upstream volume-modify suite switch
	// claims between the example classes: its overlay opts in.
	t.Run("e2e overlay", func(t *testing.T) {
		// It renders the release scripts/e2e.sh makes before it runs these tests.
		if _, err := os.Stat("../_output/e2e/release/kubernetes/base"); err != nil {
			t.Fatalf("the e2e overlay's release: %v (scripts/e2e.sh makes it with scripts/release.sh --from-image)", err)
		}
		objs := parseDocs(t, "e2e overlay", run(t, kubectl, "kustomize", "../test/e2e/overlay"))
		sameClasses(t, "test/e2e/overlay", attributesClasses(t, objs), attributesClasses(t, loadDir(t, optInClasses)))
	})
}

// attributesClasses: the parameters of each VolumeAttributesClass in objs.
func attributesClasses(t *testing.T, objs []object) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, o := range objs {
		if o.Kind == "VolumeAttributesClass" {
			var c storagev1.VolumeAttributesClass
			strict(t, o, &c)
			out[c.Name] = c.Parameters
		}
	}
	return out
}

// sameClasses: what gives the classes got (a render) gives exactly the
// example classes want, with the same parameters.
func sameClasses(t *testing.T, what string, got, want map[string]map[string]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("no example VolumeAttributesClasses in %s", optInClasses)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: VolumeAttributesClasses %v, want %s's %v", what, got, optInClasses, want)
	}
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
		checkTestedImages(t, objs)
		examples := loadDir(t, "kubernetes/examples")
		for _, o := range examples {
			if _, ok := find(objs, o.Kind, o.Name); !ok {
				t.Errorf("the chart has no %s %s (deploy/kubernetes/examples has)", o.Kind, o.Name)
			}
		}
		if got := attributesClasses(t, objs); len(got) != 0 {
			t.Errorf("the chart's defaults render VolumeAttributesClasses %v; they are opt-in", slices.Sorted(maps.Keys(got)))
		}
		if checkControllerPDB(t, objs) {
			t.Error("the chart renders a PodDisruptionBudget for its one controller replica, where it guards nothing")
		}
		// The chart mirrors the base: same RBAC rules, and the same
		// admission policy, in the same namespace.
		base := baseObjects(t)
		sameAsBase(t, base, objs, "rules", "ClusterRole", "Role")
		sameAsBase(t, base, objs, "spec", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
	})

	t.Run("values", func(t *testing.T) {
		objs := helmTemplate(t, helm,
			"--set", "imageRegistry=mirror/sig",
			"--set", "volumeGroups={nvme,ssd}",
			"--set", "thinOverprovisionRatio=2.5",
			"--set", "node.maxVolumes=20",
			"--set", "node.agentWorkers=8",
			"--set", "node.lvmShells=0",
			"--set", "kubeletDir=/var/lib/k0s/kubelet",
			"--set-string", `node.nodeSelector.lvm\.carve\.dev/storage-node=true`)
		checkAll(t, objs, namespace, "/var/lib/k0s/kubelet")
		var ds appsv1.DaemonSet
		strict(t, mustFind(t, objs, "DaemonSet", node), &ds)
		c := ds.Spec.Template.Spec.Containers[0]
		f, _ := flagArgs(c.Args)
		if f["volume-groups"] != "nvme,ssd" || f["thin-overprovision-ratio"] != "2.5" || f["max-volumes"] != "20" ||
			f["agent-workers"] != "8" || f["lvm-shells"] != "0" {
			t.Errorf("values not passed to carve node: %q", c.Args)
		}
		if c.Image != "mirror/sig/carve:v0.1.0" {
			t.Errorf("imageRegistry not applied: %q", c.Image)
		}
		if ds.Spec.Template.Spec.NodeSelector["lvm.carve.dev/storage-node"] != "true" {
			t.Errorf("nodeSelector not applied: %v", ds.Spec.Template.Spec.NodeSelector)
		}
	})

	// A digest pins an image (make release sets them all): repository@digest,
	// the tag left out, imageRegistry still applied; the others keep tags.
	t.Run("digests", func(t *testing.T) {
		d := "sha256:" + strings.Repeat("0123456789abcdef", 4)
		objs := helmTemplate(t, helm, "--set", "imageRegistry=mirror/sig",
			"--set", "image.digest="+d, "--set", "sidecars.provisioner.digest="+d)
		images := checkImages(t, objs, true)
		for _, want := range []string{"mirror/sig/carve@" + d, "mirror/sig/csi-provisioner@" + d, "mirror/sig/csi-attacher:v4.13.0"} {
			if !slices.Contains(images, want) {
				t.Errorf("no image %s in %v", want, images)
			}
		}
	})

	// A declaration in the values reaches carve node as the ConfigMap
	// it reads, as written; none renders no ConfigMap (the node's
	// optional mount then holds no file: nothing declared).
	t.Run("disk declaration", func(t *testing.T) {
		if _, ok := find(helmTemplate(t, helm), "ConfigMap", "carve-disks"); ok {
			t.Error("the defaults render a disk declaration")
		}
		values := filepath.Join(t.TempDir(), "values.yaml")
		decl := "volumeGroups:\n- volumeGroup: vg0\n  nodeSelector: {disks: nvme}\n  paths: [/dev/disk/by-id/nvme-*]\n  minSize: 100Gi\n"
		if err := os.WriteFile(values, []byte("diskDeclaration:\n  "+strings.ReplaceAll(decl, "\n", "\n  ")), 0o600); err != nil {
			t.Fatal(err)
		}
		objs := helmTemplate(t, helm, "--values", values)
		var cm corev1.ConfigMap
		strict(t, mustFind(t, objs, "ConfigMap", "carve-disks"), &cm)
		got, err := disks.Parse([]byte(cm.Data["disks.yaml"]))
		if err != nil {
			t.Fatalf("the rendered declaration: %v\n%s", err, cm.Data["disks.yaml"])
		}
		want, err := disks.Parse([]byte(decl))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("rendered declaration %+v, want %+v", got, want)
		}
		var ds appsv1.DaemonSet
		strict(t, mustFind(t, objs, "DaemonSet", node), &ds)
		f, _ := flagArgs(ds.Spec.Template.Spec.Containers[0].Args)
		v := podVolume(&ds.Spec.Template.Spec, "disk-declaration")
		if f["disk-declaration"] != "/etc/carve/disks/disks.yaml" || v == nil || v.ConfigMap == nil || v.ConfigMap.Name != "carve-disks" {
			t.Errorf("carve node does not read the ConfigMap: --disk-declaration=%q, volume %+v", f["disk-declaration"], v)
		}
	})

	// Opted in, the chart's classes are the kustomize ones; the e2e's
	// values (TestHelmTakesOver, and every scenario after it) opt in.
	t.Run("attributes classes", func(t *testing.T) {
		want := attributesClasses(t, loadDir(t, optInClasses))
		objs := helmTemplate(t, helm, "--set", "volumeAttributesClasses.enabled=true")
		decodeAll(t, objs)
		sameClasses(t, "volumeAttributesClasses.enabled=true", attributesClasses(t, objs), want)
		objs = helmTemplate(t, helm, "--values", "../test/e2e/helm-values.yaml")
		sameClasses(t, "test/e2e/helm-values.yaml", attributesClasses(t, objs), want)
	})

	// More than one replica: the budget takes them one at a time; the
	// value turns it off.
	t.Run("disruption budget", func(t *testing.T) {
		objs := helmTemplate(t, helm, "--set", "controller.replicas=2")
		decodeAll(t, objs)
		if !checkControllerPDB(t, objs) {
			t.Errorf("no PodDisruptionBudget for %s with controller.replicas=2", controller)
		}
		objs = helmTemplate(t, helm, "--set", "controller.replicas=2", "--set", "controller.podDisruptionBudget.enabled=false")
		if checkControllerPDB(t, objs) {
			t.Error("a PodDisruptionBudget with controller.podDisruptionBudget.enabled=false")
		}
	})

	// Releases side by side, each in a namespace of its own: the
	// cluster-scoped objects that nobody names by hand (RBAC, the node
	// policy) are each release's own, named after it (the base's names for
	// the release "carve"), and whole: bindings to the release's roles
	// and policy. Shared by name: the classes users name, from the values,
	// and the CSIDriver, whose name is the driver's.
	t.Run("release names", func(t *testing.T) {
		own := []string{"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
		shared := []string{"CSIDriver", "StorageClass", "VolumeAttributesClass", "VolumeSnapshotClass",
			"VolumeGroupSnapshotClass", "CustomResourceDefinition"}
		owner := map[string]string{} // kind/name -> release
		for _, r := range []struct{ release, ns string }{{"carve", namespace}, {"carve-b", "carve-b"}, {"storage", "storage"}} {
			objs := parseDocs(t, "helm template "+r.release, run(t, helm, "template", r.release, "helm/carve",
				"--namespace", r.ns, "--include-crds", "--set", "volumeAttributesClasses.enabled=true"))
			checkRBAC(t, objs, r.ns)
			checkNodePolicy(t, objs, r.ns)
			for _, o := range objs {
				switch {
				case o.Namespace != "" || slices.Contains(shared, o.Kind):
					continue
				case !slices.Contains(own, o.Kind):
					t.Errorf("release %s: %v is cluster-scoped: name it after the release (carve.clusterName) or add its kind to the shared ones", r.release, o)
					continue
				case r.release != "carve" && !strings.HasPrefix(o.Name, r.release+"-carve-"):
					t.Errorf("release %s: %v is not named after the release", r.release, o)
				}
				key := o.Kind + " " + o.Name
				if other, ok := owner[key]; ok {
					t.Errorf("%s is both release %s's and release %s's", key, other, r.release)
				}
				owner[key] = r.release
			}
		}
	})

	// logFormat reaches carve controller, carve node and every sidecar
	// (checkAll checks each of them has the flag).
	t.Run("log format", func(t *testing.T) {
		for _, format := range []string{"", "json"} {
			var args []string
			want := "text" // the default, klog's
			if format != "" {
				args, want = []string{"--set", "logFormat=" + format}, format
			}
			objs := helmTemplate(t, helm, args...)
			checkAll(t, objs, namespace, kubeletDir)
			for _, o := range []object{mustFind(t, objs, "Deployment", controller), mustFind(t, objs, "DaemonSet", node)} {
				spec, _ := podSpec(t, o)
				for _, c := range spec.Containers {
					if f, _ := flagArgs(c.Args); f["logging-format"] != want {
						t.Errorf("%v: container %s --logging-format=%q, want %s", o, c.Name, f["logging-format"], want)
					}
				}
			}
		}
	})

	// Another namespace: the policy matches the ServiceAccount there.
	t.Run("namespace", func(t *testing.T) {
		objs := parseDocs(t, "helm template", run(t, helm, "template", "carve", "helm/carve", "--namespace", "storage"))
		checkRBAC(t, objs, "storage")
		checkNodePolicy(t, objs, "storage")
	})

	t.Run("snapshots off", func(t *testing.T) {
		objs := helmTemplate(t, helm, "--set", "snapshots.enabled=false")
		for _, kind := range []string{"VolumeSnapshotClass", "VolumeGroupSnapshotClass"} {
			if _, ok := find(objs, kind, "carve"); ok {
				t.Errorf("%s rendered with snapshots.enabled=false", kind)
			}
		}
		if _, ok := find(objs, "ClusterRole", "carve-external-snapshotter-runner"); ok {
			t.Error("csi-snapshotter's ClusterRole rendered with snapshots.enabled=false")
		}
		var d appsv1.Deployment
		strict(t, mustFind(t, objs, "Deployment", controller), &d)
		if container(&d.Spec.Template.Spec, "csi-snapshotter") != nil {
			t.Error("csi-snapshotter rendered with snapshots.enabled=false")
		}
	})

	// Each class on its own: not created, or the default of its kind
	// under another name.
	t.Run("snapshot classes", func(t *testing.T) {
		for kind, value := range map[string]string{
			"VolumeSnapshotClass":      "snapshots.volumeSnapshotClass",
			"VolumeGroupSnapshotClass": "snapshots.volumeGroupSnapshotClass",
		} {
			objs := helmTemplate(t, helm, "--set", value+".create=false")
			if _, ok := find(objs, kind, "carve"); ok {
				t.Errorf("%s rendered with %s.create=false", kind, value)
			}
			other := map[string]string{"VolumeSnapshotClass": "VolumeGroupSnapshotClass", "VolumeGroupSnapshotClass": "VolumeSnapshotClass"}[kind]
			mustFind(t, objs, other, "carve")

			objs = helmTemplate(t, helm, "--set", value+".isDefault=true", "--set", value+".name=carve-default",
				"--set", value+".deletionPolicy=Retain")
			decodeAll(t, objs)
			var c snapshotClass
			strict(t, mustFind(t, objs, kind, "carve-default"), &c)
			group := map[string]string{"VolumeSnapshotClass": "snapshot", "VolumeGroupSnapshotClass": "groupsnapshot"}[kind]
			annotations, _ := c.Metadata["annotations"].(map[string]any)
			if annotations[group+".storage.kubernetes.io/is-default-class"] != "true" || c.DeletionPolicy != "Retain" {
				t.Errorf("%s carve-default: annotations %v, deletionPolicy %q; want the %s default-class annotation, Retain",
					kind, annotations, c.DeletionPolicy, group)
			}
		}
	})

	// Monitoring: the metrics Services by default; the monitors, the
	// rules and the dashboard when asked for, as the kustomize example's
	// (checkMonitoring), with the labels the values give.
	t.Run("monitoring", func(t *testing.T) {
		for _, c := range []struct {
			set  []string
			want map[string]int
		}{
			{nil, map[string]int{"Service": 2}},
			{[]string{"node.metricsPort=0"}, map[string]int{"Service": 1}},
			{[]string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prom",
				"metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=prom", "metrics.grafanaDashboard.enabled=true"},
				map[string]int{"Service": 2, "ServiceMonitor": 1, "PrometheusRule": 1}},
			{[]string{"metrics.service.enabled=false", "metrics.podMonitor.enabled=true", "metrics.podMonitor.labels.release=prom",
				"metrics.grafanaDashboard.enabled=true", "metrics.grafanaDashboard.namespace=monitoring"},
				map[string]int{"PodMonitor": 1}},
		} {
			var args []string
			for _, s := range c.set {
				args = append(args, "--set", s)
			}
			objs := helmTemplate(t, helm, args...)
			decodeAll(t, objs)
			found := checkMonitoring(t, objs, objs)
			for _, kind := range []string{"Service", "ServiceMonitor", "PodMonitor", "PrometheusRule"} {
				if found[kind] != c.want[kind] {
					t.Errorf("%v: %d %s, want %d", c.set, found[kind], kind, c.want[kind])
				}
			}
			for _, o := range objs {
				switch {
				case o.Kind == "ConfigMap" && o.Name == "carve-dashboard":
					if want := map[bool]string{true: "monitoring", false: namespace}[slices.Contains(c.set, "metrics.grafanaDashboard.namespace=monitoring")]; o.Namespace != want {
						t.Errorf("%v: %v, want namespace %s", c.set, o, want)
					}
				case strings.HasPrefix(o.APIVersion, "monitoring.coreos.com/"):
					var m struct {
						Metadata struct {
							Labels map[string]string `json:"labels"`
						} `json:"metadata"`
					}
					_ = yaml.Unmarshal(o.raw, &m)
					if m.Metadata.Labels["release"] != "prom" {
						t.Errorf("%v: labels %v, want the values' release: prom", o, m.Metadata.Labels)
					}
				}
			}
			if _, ok := find(objs, "ConfigMap", "carve-dashboard"); ok != slices.Contains(c.set, "metrics.grafanaDashboard.enabled=true") {
				t.Errorf("%v: the dashboard's ConfigMap rendered: %v", c.set, ok)
			}
		}
	})

	t.Run("refused values", func(t *testing.T) {
		for _, set := range []string{"volumeGroups=null", "controller.replicas=2,controller.leaderElection=false", "logFormat=xml",
			"metrics.serviceMonitor.enabled=true,metrics.service.enabled=false", "metrics.podMonitor.enabled=true,node.metricsPort=0",
			"image.digest=sha256:abc", "sidecars.resizer.digest=v2.3.0"} {
			cmd := exec.Command(helm, "template", "carve", "helm/carve", "--set", set)
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Errorf("helm template --set %s rendered; want a failure\n%s", set, out)
			}
		}
	})
}

// podSpec is the pod template of a Deployment or DaemonSet; ok is false for
// other kinds.
func podSpec(t *testing.T, o object) (spec *corev1.PodSpec, ok bool) {
	t.Helper()
	switch o.Kind {
	case "Deployment":
		var d appsv1.Deployment
		strict(t, o, &d)
		return &d.Spec.Template.Spec, true
	case "DaemonSet":
		var d appsv1.DaemonSet
		strict(t, o, &d)
		return &d.Spec.Template.Spec, true
	}
	return nil, false
}

// sameAsBase checks that every object of the kinds in base has a twin of
// the same kind and name in chart whose field (a top-level key: rules,
// spec) is equal.
func sameAsBase(t *testing.T, base, chart []object, field string, kinds ...string) {
	t.Helper()
	for _, b := range base {
		if !slices.Contains(kinds, b.Kind) {
			continue
		}
		h, ok := find(chart, b.Kind, b.Name)
		if !ok {
			t.Errorf("the chart has no %s %s", b.Kind, b.Name)
			continue
		}
		var bo, ho map[string]any
		_ = yaml.Unmarshal(b.raw, &bo)
		_ = yaml.Unmarshal(h.raw, &ho)
		if bo[field] == nil {
			t.Errorf("%s %s in the base has no %s to compare", b.Kind, b.Name, field)
		}
		if !reflect.DeepEqual(bo[field], ho[field]) {
			t.Errorf("%s %s: the chart's %s differ from the base's\nbase:  %v\nchart: %v", b.Kind, b.Name, field, bo[field], ho[field])
		}
	}
}
