//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/lvm"
)

// The second node, carve-host: a kubelet (fake CRI) and carve node on the
// host itself, whose VG "e2e" is a 64 MiB loop device. The host kernel
// has no device-mapper, so no LV could ever be activated there, but lvm2
// reads and reports the VG. Every test volume is larger than that VG, so
// capacity tracking must keep pods off this node: that is what it shows.
//
// carve node runs with the DaemonSet's container spec, but the node is not
// labelled for the DaemonSet: a DaemonSet pod there would make kubelet
// create its hostPath directories on the machine running the test.
const (
	hostNode   = "carve-host"
	hostVGSize = 64 << 20

	kubeletDefaultRoot = "/var/lib/kubelet"
)

func (x *harness) startHostNode() error {
	dir := filepath.Join(x.work, "host")
	root := filepath.Join(dir, "kubelet")
	for _, d := range []string{root, filepath.Join(root, "plugins_registry"), filepath.Join(root, "plugins", driverName)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	lvmEnv, err := lvm.WritePrivateConfig(filepath.Join(dir, "lvm"))
	if err != nil {
		return err
	}
	x.hostLVMEnv = lvmEnv
	if err := x.hostVG(dir, lvmEnv); err != nil {
		return err
	}

	// kubelet makes /var/lib/kubelet/device-plugins whatever its root dir
	// is; if the machine had no /var/lib/kubelet, remove it afterwards.
	if _, err := os.Stat(kubeletDefaultRoot); os.IsNotExist(err) {
		x.removeKubeletRoot = true
	}
	sock := filepath.Join(dir, "cri.sock")
	if err := x.startProc("host-fake-cri", []string{filepath.Join(x.kbin, "fake-cri"), "--endpoint=unix://" + sock}, nil); err != nil {
		return err
	}
	cfg := kubeletConfig(filepath.Join(x.work, "cluster/pki/ca.crt"), "unix://"+sock) +
		// Its own ports and pod log dir: nothing of this kubelet outside dir.
		fmt.Sprintf("port: 10350\nhealthzPort: 10358\npodLogsDir: %q\n", filepath.Join(dir, "pod-logs"))
	if err := os.WriteFile(filepath.Join(dir, "kubelet.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := x.startProc("host-kubelet", []string{filepath.Join(x.kbin, "kubelet"),
		"--config=" + filepath.Join(dir, "kubelet.yaml"), "--kubeconfig=" + x.adminKC,
		"--hostname-override=" + hostNode, "--root-dir=" + root, "--cert-dir=" + filepath.Join(dir, "pki"),
		"--v=2"}, nil); err != nil {
		return err
	}
	if err := x.waitNodeReady(hostNode); err != nil {
		return err
	}

	// The DaemonSet's carve container, its host paths under this kubelet's
	// root instead of /var/lib/kubelet.
	spec := x.r.node.Spec.Template.Spec
	mounts := map[string]string{}
	for _, vol := range spec.Volumes {
		if vol.HostPath != nil {
			p := vol.HostPath.Path
			if rest, ok := strings.CutPrefix(p, "/var/lib/kubelet"); ok {
				p = root + rest
			}
			mounts[vol.Name] = p
		}
	}
	kc := filepath.Join(dir, "carve-node.kubeconfig")
	if err := x.serviceAccountKubeconfig(spec.ServiceAccountName, "https://127.0.0.1:6443", kc); err != nil {
		return err
	}
	pe := podEnv{namespace: driverNS, nodeName: hostNode, mounts: mounts, kubeconfig: kc,
		bins: map[string]string{"carve": x.carve}}
	argv, envv, err := containerCommand(&spec.Containers[0], x.r, pe)
	if err != nil {
		return err
	}
	if err := x.startProc("host-carve-node", argv, append(envv, lvmEnv...)); err != nil {
		return err
	}
	return x.waitPlugin(hostNode)
}

// hostVG makes VG e2e on a loop device of hostVGSize.
func (x *harness) hostVG(dir string, lvmEnv []string) error {
	img := filepath.Join(dir, "pv.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		return err
	}
	if err := os.Truncate(img, hostVGSize); err != nil {
		return err
	}
	out, err := exec.Command("losetup", "--find", "--show", img).Output()
	if err != nil {
		return fmt.Errorf("losetup: %w", errText(err))
	}
	x.loop = strings.TrimSpace(string(out))
	for _, argv := range [][]string{{"pvcreate", "-q", x.loop}, {"vgcreate", "-q", "e2e", x.loop}} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), lvmEnv...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
		}
	}
	return nil
}

// stopHostNode stops the host node's processes and undoes what kubelet
// mounted under its root (it bind-mounts the root onto itself, and
// projected volumes are tmpfs mounts), then frees the loop device.
func (x *harness) stopHostNode() {
	for _, name := range []string{"host-carve-node", "host-kubelet", "host-fake-cri"} {
		x.stopProc(name, false)
	}
	root := filepath.Join(x.work, "host", "kubelet")
	if out, err := exec.Command("umount", "-R", root).CombinedOutput(); err != nil && !strings.Contains(string(out), "not mounted") {
		logf("umount -R %s: %v: %s", root, err, out)
	}
	if x.removeKubeletRoot {
		_ = os.RemoveAll(filepath.Join(kubeletDefaultRoot, "device-plugins"))
		_ = os.Remove(kubeletDefaultRoot) // only if empty: never anything else's
	}
	if x.loop != "" {
		if out, err := exec.Command("losetup", "-d", x.loop).CombinedOutput(); err != nil {
			logf("losetup -d %s: %v: %s", x.loop, err, out)
		}
	}
}

func (x *harness) waitNodeReady(node string) error {
	return x.waitFor("node "+node+" Ready", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var n corev1.Node
		if err := x.kc.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}
