//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Workload pods run busybox (test/e2e's own image) and keep running; the
// test does its reads and writes inside their containers, through the
// volume's mount as the application sees it (/data).

// execSeq numbers container execs: each needs an ID unique in its task.
var execSeq atomic.Int64

// inContainer runs argv in the pod's first container (on its VM node,
// where every workload runs) and returns its stdout.
func inContainer(t *testing.T, p *corev1.Pod, argv ...string) string {
	t.Helper()
	out, err := inContainerErr(t, p, argv...)
	if err != nil {
		t.Fatalf("in pod %s: %v", p.Name, err)
	}
	return out
}

// inContainerErr is inContainer for a command that may fail: its error is
// returned, not fatal.
func inContainerErr(t *testing.T, p *corev1.Pod, argv ...string) (string, error) {
	t.Helper()
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s has no container status", p.Name)
	}
	id, ok := strings.CutPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if !ok || id == "" {
		t.Fatalf("pod %s: container ID %q", p.Name, p.Status.ContainerStatuses[0].ContainerID)
	}
	ctr := []string{"ctr", "-a", "/run/carve-containerd/containerd.sock", "-n", "k8s.io", "tasks", "exec",
		"--exec-id", fmt.Sprintf("e2e-%d", execSeq.Add(1)), id}
	return podVM(t, p).sh(append(ctr, argv...)...)
}

// writeData writes content to file on the pod's volume and syncs it.
func writeData(t *testing.T, p *corev1.Pod, file, content string) {
	t.Helper()
	inContainer(t, p, "sh", "-c", `printf %s "$1" >"/data/$2" && sync "/data/$2"`, "sh", content, file)
}

func readData(t *testing.T, p *corev1.Pod, file string) string {
	t.Helper()
	return inContainer(t, p, "cat", "/data/"+file)
}

// fsSize is the size of the pod's volume's filesystem, as the container
// sees it (statfs: fragment size times blocks, what df shows).
func fsSize(t *testing.T, p *corev1.Pod) int64 {
	t.Helper()
	out := inContainer(t, p, "stat", "-f", "-c", "%S %b", "/data")
	f := strings.Fields(out)
	if len(f) != 2 {
		t.Fatalf("stat -f /data in %s: %q", p.Name, out)
	}
	bs, err1 := strconv.ParseInt(f[0], 10, 64)
	n, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("stat -f /data in %s: %q", p.Name, out)
	}
	return bs * n
}

// carvePod is the one pod of Carve's component ("controller", "node") on
// node.
func carvePod(t *testing.T, component, node string) *corev1.Pod {
	t.Helper()
	found, all, err := carvePods(context.Background(), component, node)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("%d %s pods on %s, want 1: %s", len(found), component, node, podsState(all))
	}
	return found[0]
}

// carvePods lists the pods of Carve's component on node that are not
// being deleted, and, for messages, every pod of the component.
func carvePods(ctx context.Context, component, node string) (found []*corev1.Pod, all []corev1.Pod, err error) {
	var pods corev1.PodList
	if err := h.kc.List(ctx, &pods, client.InNamespace(driverNS),
		client.MatchingLabels{"app.kubernetes.io/component": component}); err != nil {
		return nil, nil, err
	}
	for i := range pods.Items {
		if pods.Items[i].Spec.NodeName == node && pods.Items[i].DeletionTimestamp == nil {
			found = append(found, &pods.Items[i])
		}
	}
	return found, pods.Items, nil
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func restarts(p *corev1.Pod, container string) int32 {
	if s := containerStatus(p, container); s != nil {
		return s.RestartCount
	}
	return -1
}

// killContainer sends sig to a container's process through its node's
// containerd, as the machine's own tools would.
func killContainer(t *testing.T, p *corev1.Pod, container, sig string) {
	t.Helper()
	s := containerStatus(p, container)
	if s == nil {
		t.Fatalf("pod %s has no container %s", p.Name, container)
	}
	id, _ := strings.CutPrefix(s.ContainerID, "containerd://")
	args := []string{"-n", "k8s.io", "tasks", "kill", "-s", sig, id}
	if v := h.vmOf(p.Spec.NodeName); v != nil {
		if _, err := v.sh(append([]string{"ctr", "-a", "/run/carve-containerd/containerd.sock"}, args...)...); err != nil {
			t.Fatal(err)
		}
		return
	}
	sock := filepath.Join(h.work, "host", "containerd-state", "containerd.sock")
	if out, err := exec.Command("ctr", append([]string{"-a", sock}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ctr %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// errText adds a command's stderr to its error.
func errText(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
