//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigyaml "sigs.k8s.io/yaml"
)

// installSnapshotAddon installs what a cluster offering snapshots has: the
// VolumeSnapshot CRDs and snapshot-controller, from the manifests its
// project ships, with the image set to the version built here, one replica
// and pinned to the host node (the VM imports only what its pods run).
func (x *harness) installSnapshotAddon() error {
	if _, err := x.kubectl("apply", "--server-side", "-f", x.crdDir); err != nil {
		return err
	}
	if _, err := x.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
		return err
	}
	dir := filepath.Join(x.addons, "snapshot-controller")
	if _, err := x.kubectl("apply", "--server-side", "-f", filepath.Join(dir, "rbac-snapshot-controller.yaml")); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, "setup-snapshot-controller.yaml"))
	if err != nil {
		return err
	}
	var d appsv1.Deployment
	if err := sigyaml.Unmarshal(b, &d); err != nil {
		return fmt.Errorf("setup-snapshot-controller.yaml: %w", err)
	}
	ref, err := archiveRef(x.images["snapshot-controller"])
	if err != nil {
		return err
	}
	one := int32(1)
	d.Spec.Replicas = &one
	d.Spec.MinReadySeconds = 0
	d.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": hostNode}
	d.Spec.Template.Spec.Containers[0].Image = ref
	out, err := sigyaml.Marshal(&d)
	if err != nil {
		return err
	}
	path := filepath.Join(x.work, "snapshot-controller.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return err
	}
	_, err = x.kubectl("apply", "--server-side", "-f", path)
	return err
}

// installCarve applies the release's manifests (deploy/'s, every image
// pinned by digest) rendered through test/e2e/overlay, as a user installs
// them, and waits for the pods: the
// controller Deployment's on the host node, the node DaemonSet's on both
// nodes, each registered with its kubelet and reporting its VG.
func (x *harness) installCarve() error {
	out, err := x.kubectl("kustomize", filepath.Join(x.repo, "test/e2e/overlay"))
	if err != nil {
		return err
	}
	if err := x.checkPinned(out); err != nil {
		return err
	}
	path := filepath.Join(x.work, "rendered.yaml")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		return err
	}
	if _, err := x.kubectl("apply", "--server-side", "-f", path); err != nil {
		return err
	}
	return x.waitCarveReady()
}

// waitCarveReady waits until the controller's pod and a node pod on every
// node are ready, and each node's plugin is registered and reporting.
func (x *harness) waitCarveReady() error {
	if err := x.waitPodsReady(map[string]string{"app.kubernetes.io/component": "controller"}, 1, 5*time.Minute); err != nil {
		return err
	}
	nodes := allNodes()
	if err := x.waitPodsReady(map[string]string{"app.kubernetes.io/component": "node"}, len(nodes), 5*time.Minute); err != nil {
		return err
	}
	for _, n := range nodes {
		if err := x.waitPlugin(n); err != nil {
			return err
		}
	}
	return nil
}

// waitPodsReady waits until n pods of Carve's namespace with labels run
// with every container ready, logging how long they took from creation.
func (x *harness) waitPodsReady(labels map[string]string, n int, timeout time.Duration) error {
	var pods corev1.PodList
	err := x.waitFor(fmt.Sprintf("%d pods %v ready", n, labels), timeout, func(ctx context.Context) (bool, error) {
		if err := x.kc.List(ctx, &pods, client.InNamespace(driverNS), client.MatchingLabels(labels)); err != nil {
			return false, err
		}
		ready := 0
		for i := range pods.Items {
			if podReady(&pods.Items[i]) {
				ready++
			}
		}
		return ready == n, nil
	})
	if err != nil {
		return fmt.Errorf("%w; pods: %s", err, podsState(pods.Items))
	}
	for _, p := range pods.Items {
		logf("pod %s on %s ready %s after creation", p.Name, p.Spec.NodeName, readySince(&p).Round(time.Second))
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func readySince(p *corev1.Pod) time.Duration {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Sub(p.CreationTimestamp.Time)
		}
	}
	return 0
}

// podsState says, for a failure message, where each pod stands.
func podsState(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "%s on %q: %s;", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			switch {
			case c.State.Waiting != nil:
				fmt.Fprintf(&b, " %s waiting (%s: %s)", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
			case c.State.Terminated != nil:
				fmt.Fprintf(&b, " %s terminated (%s, exit %d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
			}
		}
		b.WriteString(" ")
	}
	return b.String()
}

// uninstall deletes what installCarve (or helmInstall) and
// installSnapshotAddon applied, so that kubelets stop the pods before the
// nodes go.
func (x *harness) uninstall() {
	if x.helmInstalled {
		if _, err := x.helm("uninstall", helmRelease, "--namespace", driverNS, "--wait", "--timeout", "2m"); err != nil {
			logf("uninstall: %v", err)
		}
	}
	for _, f := range []string{"rendered.yaml", "snapshot-controller.yaml"} {
		path := filepath.Join(x.work, f)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		if _, err := x.kubectl("delete", "--ignore-not-found", "--wait=true", "--timeout=2m", "-f", path); err != nil {
			logf("uninstall: %v", err)
		}
	}
}

// The processes that must run only inside containers: Carve and the
// sidecars. The harness starts none of them.
var containerised = map[string]bool{"carve": true, "csi-provisioner": true, "csi-attacher": true,
	"csi-resizer": true, "csi-snapshotter": true, "snapshot-contr": true} // comm is cut at 15 bytes

// checkContainerised logs `kubectl get pods -A -o wide` and checks that
// every pod runs with each container started from an imported image, and
// that on both nodes every Carve and sidecar process lives in a mount
// namespace of its own (a container's), none in the node's.
func (x *harness) checkContainerised() error {
	out, err := x.kubectl("get", "pods", "-A", "-o", "wide")
	if err != nil {
		return err
	}
	logf("pods:\n%s", out)
	var pods corev1.PodList
	if err := x.kc.List(context.Background(), &pods); err != nil {
		return err
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running == nil || c.ImageID == "" {
				return fmt.Errorf("pod %s/%s container %s: not running from an image (%+v, image ID %q)",
					p.Namespace, p.Name, c.Name, c.State, c.ImageID)
			}
		}
	}
	host, err := processesOutsideContainers("/proc", "/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	// The same walk in each VM, in its shell: the names of the processes
	// that share PID 1's mount namespace. One find reads every process's
	// namespace and the shell's own read takes each name: a process (cat,
	// readlink) per process of the VM took 1-1.5 minutes of the e2e's
	// 2-minute limit on an emulated CPU, and ran out on a loaded machine.
	for _, node := range lvmNodes() {
		vmOut, err := x.vmOf(node).sh("sh", "-c", `self=$(readlink /proc/1/ns/mnt)
find /proc/[0-9]*/ns/mnt -maxdepth 0 -printf '%h %l\n' 2>/dev/null | while read -r d n; do
	[ -n "$n" ] && [ "$n" = "$self" ] && { read -r c < "${d%/ns}/comm"; } 2>/dev/null && echo "$c"
done; exit 0`)
		if err != nil {
			return err
		}
		for _, c := range strings.Fields(vmOut) {
			if containerised[c] {
				host = append(host, c+" ("+node+")")
			}
		}
	}
	if len(host) > 0 {
		return fmt.Errorf("processes outside containers: %v", host)
	}
	return nil
}

// processesOutsideContainers lists the containerised commands among the
// processes of procDir that share the mount namespace ns.
func processesOutsideContainers(procDir, ns string) ([]string, error) {
	self, err := os.Readlink(ns)
	if err != nil {
		return nil, err
	}
	dirs, err := filepath.Glob(filepath.Join(procDir, "[0-9]*"))
	if err != nil {
		return nil, err
	}
	var found []string
	for _, d := range dirs {
		comm, err1 := os.ReadFile(filepath.Join(d, "comm"))
		mnt, err2 := os.Readlink(filepath.Join(d, "ns", "mnt"))
		if err1 != nil || err2 != nil {
			continue // gone meanwhile
		}
		if c := strings.TrimSpace(string(comm)); containerised[c] && mnt == self {
			found = append(found, c+" (host node, "+filepath.Base(d)+")")
		}
	}
	return found, nil
}

// checkPinned: every image of Carve's pods in the rendered manifests is one
// the release lists (images.txt: name, tagged, repository@digest), and each
// is used.
func (x *harness) checkPinned(rendered string) error {
	b, err := os.ReadFile(filepath.Join(x.release, "images.txt"))
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || !strings.Contains(f[2], "@sha256:") {
			return fmt.Errorf("release images.txt: bad line %q", line)
		}
		want[f[2]] = false
	}
	for _, m := range regexp.MustCompile(`(?m)^\s+image: (\S+)$`).FindAllStringSubmatch(rendered, -1) {
		if _, ok := want[m[1]]; !ok {
			return fmt.Errorf("the rendered manifests run %s, which the release does not pin", m[1])
		}
		want[m[1]] = true
	}
	for ref, used := range want {
		if !used {
			return fmt.Errorf("the rendered manifests do not run the release's %s", ref)
		}
	}
	return nil
}
