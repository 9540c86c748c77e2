package deploy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ---------------------------------------------------------------------------
// The objects' essentials, shared by the raw manifests, kustomize's output
// and Helm's.

func checkCSIDriver(t *testing.T, objs []object) {
	t.Helper()
	var d storagev1.CSIDriver
	strict(t, mustFind(t, objs, "CSIDriver", driverName), &d)
	s := d.Spec
	if s.SELinuxMount == nil || !*s.SELinuxMount {
		t.Error("CSIDriver: seLinuxMount must be true (Carve passes kubelet's -o context through)")
	}
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

	// Staging and target paths are kubelet's: carve node refuses any
	// outside --path-root, so it must be kubelet's directory, where the
	// pod sees it (the mount above).
	if flags["path-root"] != kubelet {
		t.Errorf("%v: --path-root=%q, want kubelet's directory %s", o, flags["path-root"], kubelet)
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
	checkRestricted(t, o, spec)
	if v := podVolume(spec, "socket-dir"); v == nil || v.EmptyDir == nil {
		t.Errorf("%v: socket-dir must be an emptyDir", o)
	}

	if s := container(spec, "csi-snapshotter"); s != nil {
		f, _ := flagArgs(s.Args)
		if v, ok := f["extra-create-metadata"]; !ok || (v != "" && v != "true") {
			t.Errorf("%v: csi-snapshotter needs --extra-create-metadata (the node agent's events reach the VolumeSnapshot)", o)
		}
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

// checkControllerPDB checks the controller's disruption budget, if objs
// hold one, and tells whether they do. It selects the controller
// Deployment's pods and no others; it lets one of them go at a time
// (maxUnavailable 1, never minAvailable: with one replica that would refuse
// every drain of its node), and a pod that is not Ready always.
func checkControllerPDB(t *testing.T, objs []object) bool {
	t.Helper()
	var found []object
	for _, o := range objs {
		if o.Kind == "PodDisruptionBudget" {
			found = append(found, o)
		}
	}
	if len(found) == 0 {
		return false
	}
	o := found[0]
	if len(found) > 1 || o.Name != controller {
		t.Errorf("disruption budgets %v, want the one %s", found, controller)
	}
	var pdb policyv1.PodDisruptionBudget
	strict(t, o, &pdb)
	s := pdb.Spec
	if s.MinAvailable != nil || s.MaxUnavailable == nil || s.MaxUnavailable.String() != "1" {
		t.Errorf("%v: minAvailable %v, maxUnavailable %v; want maxUnavailable 1 alone", o, s.MinAvailable, s.MaxUnavailable)
	}
	if s.UnhealthyPodEvictionPolicy == nil || *s.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
		t.Errorf("%v: unhealthyPodEvictionPolicy %v, want AlwaysAllow", o, s.UnhealthyPodEvictionPolicy)
	}
	sel, err := metav1.LabelSelectorAsSelector(s.Selector)
	if err != nil || sel.Empty() {
		t.Errorf("%v: selector %v (%v)", o, s.Selector, err)
		return true
	}
	var d appsv1.Deployment
	strict(t, mustFind(t, objs, "Deployment", controller), &d)
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("%v: selector %s does not select the controller's pods %v", o, sel, d.Spec.Template.Labels)
	}
	var ds appsv1.DaemonSet
	strict(t, mustFind(t, objs, "DaemonSet", node), &ds)
	if sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("%v: selector %s selects the node plugin's pods too", o, sel)
	}
	return true
}

// checkRestricted: every container of the controller pod (carve controller
// needs no privilege; the sidecars' images run as any user) runs as a
// non-root user on a read-only root filesystem, cannot gain privileges,
// has no capability and the runtime's default seccomp profile: Pod
// Security's restricted profile, and a read-only root besides.
func checkRestricted(t *testing.T, o object, spec *corev1.PodSpec) {
	t.Helper()
	pod := spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		what := fmt.Sprintf("%v: container %s", o, c.Name)
		nonRoot, user := pod.RunAsNonRoot, pod.RunAsUser
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
		if sc.RunAsUser != nil {
			user = sc.RunAsUser
		}
		if nonRoot == nil || !*nonRoot || user == nil || *user == 0 {
			t.Errorf("%s: must run as a non-root user (runAsNonRoot and a runAsUser other than 0)", what)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: needs readOnlyRootFilesystem", what)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: needs allowPrivilegeEscalation: false", what)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s: privileged", what)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s: must drop ALL capabilities and add none", what)
		}
		seccomp := pod.SeccompProfile
		if sc.SeccompProfile != nil {
			seccomp = sc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: needs seccompProfile RuntimeDefault", what)
		}
	}
}
