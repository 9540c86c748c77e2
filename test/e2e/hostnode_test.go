//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/lvm"
	"carve.dev/carve/test/e2e/svcproxy"
)

// The second node, carve-host: containerd, runc and a kubelet on the host
// itself, where the controller Deployment and snapshot-controller run, and
// a carve node pod (the DaemonSet's) whose VG "e2e" is a 64 MiB loop
// device. The host kernel has no device-mapper, so no LV could ever be
// activated there, but lvm2 reads and reports the VG. Every test volume is
// larger than that VG, so capacity tracking must keep pods off this node:
// that is what it shows.
//
// The test runs in network, mount and PID namespaces of its own
// (scripts/e2e.sh), so this node's paths are the standard ones
// (/var/lib/kubelet, /var/lib/carve, /etc/lvm, /run/lvm, /run/containerd), each a mount of
// a directory of the test's over the machine's, seen by nothing outside;
// its pod network is a bridge in the test's network namespace; and
// whatever the test leaves running dies with its PID namespace.
const (
	hostNode   = "carve-host"
	hostVGSize = 64 << 20
	// The kubernetes Service's ClusterIP (first of the service range).
	serviceIP = "10.0.0.1"
	// The host node's InternalIP (scripts/e2e.sh puts it on lo): without
	// one, its kubelet registers no address at all (it finds no default
	// route to pick an interface by), and the apiserver can reach
	// neither it nor its pods for kubectl exec, logs or port-forward.
	hostNodeIP = "10.0.1.1"
)

func (x *harness) startHostNode() error {
	dir := filepath.Join(x.work, "host")
	if err := x.hostMounts(dir); err != nil {
		return err
	}
	if err := x.hostVG(dir); err != nil {
		return err
	}
	if err := x.startServiceProxy(); err != nil {
		return err
	}
	sock, err := x.startHostContainerd(dir)
	if err != nil {
		return err
	}
	cfg := kubeletConfig(filepath.Join(x.work, "cluster/pki/ca.crt"), "unix://"+sock, "127.0.0.1", hostKubeletPort, false)
	if err := os.WriteFile(filepath.Join(dir, "kubelet.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := x.startProc("host-kubelet", []string{filepath.Join(x.kbin, "kubelet"),
		"--config=" + filepath.Join(dir, "kubelet.yaml"), "--kubeconfig=" + x.adminKC,
		"--hostname-override=" + hostNode, "--node-ip=" + hostNodeIP, "--node-labels=lvm.carve.dev/storage-node=true",
		"--root-dir=/var/lib/kubelet", "--cert-dir=" + filepath.Join(dir, "pki"), "--v=2"}, nil); err != nil {
		return err
	}
	return x.waitNodeReady(hostNode)
}

// hostMounts gives this node the standard paths of a node, each a mount
// (in the test's own mount namespace) of a directory under dir or a tmpfs.
func (x *harness) hostMounts(dir string) error {
	binds := map[string]string{
		"/var/lib/kubelet": filepath.Join(dir, "kubelet"),
		"/etc/lvm":         filepath.Join(dir, "lvm"),
		// carve node's state on the node: its transfer key and
		// certificate (/var/lib/carve/transfer).
		"/var/lib/carve": filepath.Join(dir, "carve"),
		// Containers' logs, kept with the test's logs.
		"/var/log/pods": filepath.Join(x.logs, "host-pods"),
	}
	// A node's /etc/lvm holds lvm2's command profiles, which its package
	// installs (lvmdbusd.profile: carve's lvm2 shells run with it); the
	// VM nodes copy theirs from here too (scripts/vm/guest.sh).
	if err := copyFlatDir("/etc/lvm/profile", filepath.Join(dir, "lvm", "profile")); err != nil {
		return fmt.Errorf("lvm2's command profiles: %w", err)
	}
	for dst, src := range binds {
		if err := x.mountOver(src, dst, syscall.MS_BIND); err != nil {
			return err
		}
	}
	tmpfs := []string{"/run/lvm", "/run/lock/lvm", "/run/containerd", "/run/netns"}
	// The node DaemonSet mounts /lib/modules (a hostPath of type
	// Directory, for modprobe); a container running these tests may have
	// none, where an empty one stands in.
	if !fileExists("/lib/modules") {
		tmpfs = append(tmpfs, "/lib/modules")
	}
	for _, dst := range tmpfs {
		if err := x.mountOver("tmpfs", dst, 0); err != nil {
			return err
		}
	}
	return nil
}

// copyFlatDir copies the regular files of directory src into dst (made).
func copyFlatDir(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// mountOver mounts src (a directory to bind, or "tmpfs") at dst. A dst the
// machine lacks is made, and removed again at teardown.
func (x *harness) mountOver(src, dst string, flags uintptr) error {
	if _, err := os.Stat(dst); os.IsNotExist(err) {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		x.madeDirs = append(x.madeDirs, dst)
	}
	fstype := ""
	if src == "tmpfs" {
		fstype = "tmpfs"
	} else if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount(src, dst, fstype, flags, ""); err != nil {
		return fmt.Errorf("mount %s on %s: %w", src, dst, err)
	}
	return nil
}

// startServiceProxy makes the kubernetes Service's ClusterIP answer in
// this namespace (scripts/e2e.sh put it on lo): pods of the host node reach
// the apiserver there, as pods do through kube-proxy elsewhere.
func (x *harness) startServiceProxy() error {
	l, err := net.Listen("tcp", serviceIP+":443")
	if err != nil {
		return fmt.Errorf("the kubernetes Service's address: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	x.stopProxy = cancel
	go func() {
		if err := svcproxy.Serve(ctx, l, "127.0.0.1:6443"); err != nil {
			logf("service proxy: %v", err)
		}
	}()
	return nil
}

// startHostContainerd starts this node's containerd and imports the images
// its pods run; it returns the CRI socket.
func (x *harness) startHostContainerd(dir string) (string, error) {
	state := filepath.Join(dir, "containerd-state")
	cni := filepath.Join(dir, "cni")
	if err := os.MkdirAll(cni, 0o755); err != nil {
		return "", err
	}
	conf := cniConfig("carve-host0", "10.244.0.0/24", filepath.Join(dir, "cni-ipam"))
	if err := os.WriteFile(filepath.Join(cni, "10-carve-e2e.conflist"), []byte(conf), 0o644); err != nil {
		return "", err
	}
	cfgPath := filepath.Join(dir, "containerd.toml")
	cfg := containerdConfig(filepath.Join(dir, "containerd"), state, cni)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return "", err
	}
	if err := x.startProc("host-containerd", []string{"containerd", "--config", cfgPath}, nil); err != nil {
		return "", err
	}
	sock := filepath.Join(state, "containerd.sock")
	if err := x.waitFor("host containerd", time.Minute, func(context.Context) (bool, error) {
		_, err := os.Stat(sock)
		return err == nil, nil
	}); err != nil {
		return "", err
	}
	images := filepath.Join(dir, "images")
	if err := stageImages(images, x.images); err != nil {
		return "", err
	}
	return sock, importImages(sock, images)
}

// importImages imports every archive of dir (stageImages) into the
// runtime's k8s.io namespace under the names the CRI looks it up by.
func importImages(sock, dir string) error {
	archives, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return err
	}
	ctr := func(args ...string) error {
		out, err := exec.Command("ctr", append([]string{"-a", sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	for _, a := range archives {
		if err := ctr("images", "import", a); err != nil {
			return err
		}
		base := strings.TrimSuffix(a, ".tar")
		name, err := os.ReadFile(base + ".name")
		if err != nil {
			return err
		}
		refs, err := os.ReadFile(base + ".ref")
		if err != nil {
			return err
		}
		for _, ref := range strings.Fields(string(refs)) {
			if ref == string(name) {
				continue
			}
			if err := ctr("images", "tag", "--force", string(name), ref); err != nil {
				return err
			}
		}
	}
	return nil
}

// hostVG makes VG e2e on a loop device of hostVGSize, with the host node's
// LVM configuration (/etc/lvm in the test's mount namespace, which carve's
// node pod mounts) filtered to that device: lvm2 scans every block device of
// the machine's kernel, and another run's loop device with a VG "e2e", left
// attached when that run was killed, made vgcreate fail here.
func (x *harness) hostVG(dir string) error {
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
	lvmEnv, err := lvm.WritePrivateConfig("/etc/lvm", x.loop)
	if err != nil {
		return err
	}
	x.hostLVMEnv = lvmEnv
	for _, argv := range [][]string{{"pvcreate", "-q", x.loop}, {"vgcreate", "-q", "e2e", x.loop}} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), lvmEnv...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
		}
	}
	return nil
}

// stopHostNode stops the host node: kubelet first (its pods were deleted
// with the manifests), then every container left and containerd; the
// mounts go with the test's mount namespace. It frees the loop device and
// removes directories it made on the machine.
func (x *harness) stopHostNode() {
	x.stopProc("host-kubelet", false)
	if sock := filepath.Join(x.work, "host", "containerd-state", "containerd.sock"); fileExists(sock) {
		x.killContainers(sock)
	}
	x.stopProc("host-containerd", false)
	if x.stopProxy != nil {
		x.stopProxy()
	}
	for i := len(x.madeDirs) - 1; i >= 0; i-- {
		_ = syscall.Unmount(x.madeDirs[i], syscall.MNT_DETACH)
		_ = os.Remove(x.madeDirs[i]) // only if empty: never anything else's
	}
	if x.loop != "" {
		if out, err := exec.Command("losetup", "-d", x.loop).CombinedOutput(); err != nil {
			logf("losetup -d %s: %v: %s", x.loop, err, out)
		}
	}
}

// killContainers ends every task containerd still runs and removes it.
func (x *harness) killContainers(sock string) {
	out, err := exec.Command("ctr", "-a", sock, "-n", "k8s.io", "tasks", "ls", "-q").Output()
	if err != nil {
		logf("ctr tasks ls: %v", errText(err))
		return
	}
	for _, id := range strings.Fields(string(out)) {
		for _, args := range [][]string{{"tasks", "kill", "-s", "SIGKILL", id}, {"tasks", "delete", "-f", id}, {"containers", "rm", id}} {
			_ = exec.Command("ctr", append([]string{"-a", sock, "-n", "k8s.io"}, args...)...).Run()
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

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
