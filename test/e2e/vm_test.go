//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// vm is the QEMU guest of one VM node and the vmexec server in it.
type vm struct {
	cmd  *exec.Cmd
	done chan struct{}
	base string
	http *http.Client
}

// vmNodeSpec is one VM node: its name, and the ports and pod network that
// keep it apart from the other. The apiserver reaches a kubelet (kubectl
// exec, logs; the upstream storage suite writes and checks data that way)
// at the node's Hostname address, which the test's /etc/hosts
// (scripts/e2e.sh) maps to 127.0.0.1 for every node, and the port the
// kubelet registered: each VM's is forwarded there by QEMU (run.sh
// --expose), as is its vmexec, so every node needs ports of its own.
type vmNodeSpec struct {
	name        string
	execPort    int
	kubeletPort int
	podSubnet   string
	// linkPort and linkAddress: the node's end of the link between the
	// two VM nodes (run.sh --link), a host loopback UDP port and the
	// guest's address on the segment, through which each routes to the
	// other's pod subnet: pods reach pods on the other node by their
	// own addresses, as on a user's cluster network.
	linkPort    int
	linkAddress string
	// disks: VG e2e takes the first two (node-vm.sh); a third stays blank,
	// a disk the administrator may give lvm2 later (TestDevicesFile).
	disks int
}

// vmNodes are the nodes with real LVM, two as the smallest fleet where
// placement, spreading and a lost node mean something. Both boot in the
// production profile (scripts/vm/run.sh --profile production): udevd with
// lvm2's rules, event autoactivation, dmeventd, the devices file.
var vmNodes = []*vmNodeSpec{
	{name: vmNode, execPort: 7070, kubeletPort: 10252, podSubnet: "10.244.1.0/24", disks: 2,
		linkPort: 7170, linkAddress: "192.168.77.1"},
	{name: vmNode2, execPort: 7071, kubeletPort: 10253, podSubnet: "10.244.2.0/24", disks: 3,
		linkPort: 7171, linkAddress: "192.168.77.2"},
}

// vmPeer is the VM node at the link's other end: the link joins exactly
// two.
func vmPeer(n *vmNodeSpec) *vmNodeSpec {
	for _, p := range vmNodes {
		if p != n {
			return p
		}
	}
	panic("one VM node has no peer")
}

// podRoutes are node n's routes to the other VM node's pods, a line each
// ("SUBNET via ADDRESS", node-vm.sh's routes file).
func podRoutes(n *vmNodeSpec) string {
	p := vmPeer(n)
	return fmt.Sprintf("%s %s\n", p.podSubnet, p.linkAddress)
}

// The host node's kubelet port (the VM nodes' are in vmNodes).
const hostKubeletPort = 10250

// vmLifetime is how long, in seconds, the VM node may run before run.sh
// stops it: a bound on a wedged run, never a budget. It follows the test
// binary's own hang guard (-test.timeout, which scripts/e2e.sh and the
// make targets set; 0, no guard, as for make e2e-upstream's hours): a
// loaded machine makes the run later, and the VM must outlive it.
func vmLifetime() int {
	guard := 24 * time.Hour
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, ok := f.Value.(flag.Getter).Get().(time.Duration); ok && d > 0 {
			guard = d
		}
	}
	return int((guard + 10*time.Minute).Seconds())
}

// vmDiskSize is the size of each of a VM node's disks (sparse files;
// discards punch holes). VG e2e (the first two, less the 1 GiB thin pool) must hold
// the upstream volumeLimits spec at once: the attach limit (32) plus two
// thick volumes of the driver file's 300 MiB minimum, 10 GiB.
const vmDiskSize = "6G"

// vmCPUs is the VM node's number of vCPUs: CARVE_E2E_VM_CPUS, 1 by default.
func vmCPUs() string {
	if n := os.Getenv("CARVE_E2E_VM_CPUS"); n != "" {
		return n
	}
	return "1"
}

// kubeletConfig is the KubeletConfiguration of both nodes' kubelets.
// perQOS gives each pod a cgroup of its own, under kubelet's QoS
// hierarchy (kubepods/...): the VM node's, on cgroup v2, where Carve puts
// a volume's IO limits (io.max of the pod's cgroup). The host node, on
// cgroup v1 without systemd, has none: containers' cgroups go straight
// under the runtime's, with no hierarchy kubelet would have to manage.
func kubeletConfig(caFile, criEndpoint, address string, port int, perQOS bool) string {
	return fmt.Sprintf(kubeletConfigTemplate, address, port, caFile, perQOS, criEndpoint)
}

const kubeletConfigTemplate = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupsPerQOS: %t
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: %q
resolvConf: /etc/resolv.conf
clusterDNS: [10.0.0.10]
clusterDomain: cluster.local
# Less housekeeping for one emulated CPU.
localStorageCapacityIsolation: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {"memory.available": "1Mi"}
syncFrequency: 30s
# A container that exits is restarted within 10 s, not after kubelet's
# default back-off, which doubles up to 5 minutes: the soak
# (TestClusterSoak) kills carve's containers over and over, and the
# controller's sidecars exit with each kill of carve controller; it tests
# Carve's recovery, not how long kubelet waits to restart it.
crashLoopBackOff: {maxContainerRestartPeriod: 10s}
`

// The VM nodes' images: what their pods run (the node DaemonSet, workloads).
var vmImages = []string{"carve", "pause", "busybox"}

// startVMs boots every VM node at once, each with node-vm.sh, which starts
// containerd, kubelet and vmexec, and waits until all are Ready.
func (x *harness) startVMs() error {
	imgs := map[string]string{}
	for _, n := range vmImages {
		imgs[n] = x.images[n]
	}
	if err := stageImages(filepath.Join(x.work, "vm-images"), imgs); err != nil {
		return err
	}
	x.vms = map[string]*vm{}
	errs := make(chan error, len(vmNodes))
	for _, n := range vmNodes {
		go func() { errs <- x.startVM(n) }()
	}
	var first error
	for range vmNodes {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// startVM writes node n's configuration and boots it on blank disks.
func (x *harness) startVM(n *vmNodeSpec) error {
	dir := x.vmDir(n.name)
	if err := os.MkdirAll(filepath.Join(dir, "cni"), 0o755); err != nil {
		return err
	}
	// The VM sees x.work (a share), so the kubelet reads the cluster's CA
	// and guest kubeconfig where cluster.sh wrote them. It authenticates
	// as the cluster admin: the loopback control plane has no
	// bootstrap-token flow.
	// In the VM, the kubelet listens on every address: QEMU's forward
	// arrives at the guest's NIC, and nothing but that forward reaches it
	// (run.sh's network is restrict=on).
	files := map[string]string{
		"kubelet.yaml": kubeletConfig(filepath.Join(x.work, "cluster/pki/ca.crt"), "unix:///run/carve-containerd/containerd.sock",
			"0.0.0.0", n.kubeletPort, true),
		"containerd.toml":           containerdConfig("/var/lib/carve-containerd", "/run/carve-containerd", filepath.Join(dir, "cni")),
		"cni/10-carve-e2e.conflist": cniConfig("carve-vm0", n.podSubnet, "/var/lib/cni/networks"),
		"routes":                    podRoutes(n),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(x.vmDisks(n.name)); err != nil { // a new node's blank disks
		return err
	}
	return x.bootVM(n.name)
}

// vmDir holds a VM node's configuration; its logs go to x.logs/NODE.
func (x *harness) vmDir(node string) string { return filepath.Join(x.work, "nodes", node) }

// vmDisks is where a VM node's disks are kept from one boot to the next.
func (x *harness) vmDisks(node string) string { return filepath.Join(x.vmDir(node), "disks") }

// vmSpec is the VM node named node.
func vmSpec(node string) *vmNodeSpec {
	for _, n := range vmNodes {
		if n.name == node {
			return n
		}
	}
	panic("no VM node " + node)
}

// bootVM boots a VM node on its disks (blank, or as the last boot left
// them) and waits until the node is Ready.
func (x *harness) bootVM(node string) error {
	n := vmSpec(node)
	logs := filepath.Join(x.logs, node)
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(logs, "vm.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(x.repo, "scripts/vm/run.sh"), "--profile", "production",
		"--disks", fmt.Sprint(n.disks), "--disk-size", vmDiskSize, "--disk-dir", x.vmDisks(node),
		"--mem", "4G", "--cpus", vmCPUs(), "--timeout", fmt.Sprint(vmLifetime()), "--forward", "6443",
		"--expose", fmt.Sprint(n.execPort), "--expose", fmt.Sprint(n.kubeletPort),
		"--link", fmt.Sprintf("%d:%d", n.linkPort, vmPeer(n).linkPort), "--link-address", n.linkAddress+"/24",
		// The Kubernetes binaries may live under a HOME in /tmp (a cold CI
		// run), which the guest's own /tmp hides.
		"--share", x.work, "--view", x.kbin, "--",
		"bash", filepath.Join(x.repo, "test/e2e/node-vm.sh"), x.work, node, x.kbin, x.vmexec, fmt.Sprint(n.execPort))
	// The pod network's kernel modules, beside the storage ones.
	cmd.Env = append(os.Environ(), "CARVE_VM_MODULES=dm_snapshot dm_thin_pool dm_mirror raid1 dm_raid dm_crypt loop bridge veth overlay")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	v := &vm{cmd: cmd, done: make(chan struct{}), base: fmt.Sprintf("http://127.0.0.1:%d", n.execPort),
		http: &http.Client{Timeout: 10 * time.Minute}}
	go func() { _ = cmd.Wait(); _ = log.Close(); close(v.done) }()
	x.vmsMu.Lock()
	x.vms[node] = v
	x.vmsMu.Unlock()
	if err := v.waitReady(hangGuard(5 * time.Minute)); err != nil {
		// The log's end in the error itself: a CI run's logs go with
		// its machine, and a VM that stops at boot says why only there.
		return fmt.Errorf("%s: %w; the end of its vm.log:\n%s", node, err, logTail(log.Name(), 40))
	}
	return x.waitNodeReady(node)
}

// logTail is the last n lines of the file at path, or why it cannot be
// read.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (v *vm) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-v.done:
			return fmt.Errorf("the VM stopped before vmexec answered; see its vm.log")
		default:
		}
		if resp, err := http.Get(v.base + "/ready"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("vmexec did not answer in %s", timeout)
}

func (v *vm) post(path string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := v.http.Post(v.base+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("vmexec %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("vmexec %s: %s: %s", path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

type execResult struct {
	Code   int    `json:"code"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// sh runs argv in the VM and returns stdout; a non-zero exit is an error
// carrying stderr. vmexec kills it after 2 minutes (shWithin for longer).
func (v *vm) sh(argv ...string) (string, error) {
	return v.shWithin(0, argv...)
}

// shWithin is sh with a hang guard of its own (whole seconds; 0: vmexec's
// 2 minutes).
func (v *vm) shWithin(guard time.Duration, argv ...string) (string, error) {
	var r execResult
	if err := v.post("/exec", map[string]any{"argv": argv, "timeoutSeconds": int(guard.Seconds())}, &r); err != nil {
		return "", err
	}
	if r.Code != 0 {
		return r.Stdout, fmt.Errorf("in the VM, %q: exit %d: %s", argv, r.Code, strings.TrimSpace(r.Stderr))
	}
	return r.Stdout, nil
}

// powerCut stops the VM as a power cut stops a machine: QEMU ends (run.sh
// turns TERM into QEMU's TERM), the guest gets no shutdown, and its kept
// disks hold what they had acknowledged.
func (v *vm) powerCut() {
	_ = v.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-v.done:
	case <-time.After(time.Minute):
		_ = v.cmd.Process.Kill()
		<-v.done
	}
}

func (v *vm) shutdown(ctx context.Context) {
	_ = v.post("/shutdown", struct{}{}, nil)
	select {
	case <-v.done:
	case <-ctx.Done():
		_ = v.cmd.Process.Kill()
	}
}

// waitPlugin waits for node's kubelet to list the driver on the CSINode
// and for the agent's NodeStorage.
func (x *harness) waitPlugin(node string) error {
	return x.waitFor("carve node on "+node+" registered and reporting", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var cn storagev1.CSINode
		if err := x.kc.Get(ctx, types.NamespacedName{Name: node}, &cn); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		found := false
		for _, d := range cn.Spec.Drivers {
			found = found || d.Name == driverName
		}
		var ns v1alpha1.NodeStorage
		if err := x.kc.Get(ctx, types.NamespacedName{Name: node}, &ns); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return found && len(ns.Status.VolumeGroups) > 0, nil
	})
}

// hangGuardSlack stretches every wait's timeout (waitFor, the VM's boot):
// a wait is a hang guard, never a speed check. The figures written at the
// waits are about the slowest seen on a quiet machine; a cold run, with
// the VM suites and builds beside the e2e on two cores, ran the same
// steps two to three times slower (measured on a cold run), so a wait gives up only at
// four times its figure. CARVE_E2E_SLACK sets another factor (a
// deliberately slowed run).
func hangGuard(d time.Duration) time.Duration {
	slack := 4.0
	if f, err := strconv.ParseFloat(os.Getenv("CARVE_E2E_SLACK"), 64); err == nil && f >= 1 {
		slack = f
	}
	return time.Duration(float64(d) * slack)
}

// waitFor polls cond every second until it holds, fails, or its hang
// guard (timeout, stretched by hangGuard) ends.
func (x *harness) waitFor(what string, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	timeout = hangGuard(timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// vmOf is the VM of node, nil when node is no VM node (carve-host).
func (x *harness) vmOf(node string) *vm {
	x.vmsMu.Lock()
	defer x.vmsMu.Unlock()
	return x.vms[node]
}

// vmNamed is the VM of node, an error when node is no VM node.
func (x *harness) vmNamed(node string) (*vm, error) {
	if v := x.vmOf(node); v != nil {
		return v, nil
	}
	return nil, fmt.Errorf("node %q is not a VM node (want one of %v)", node, lvmNodes())
}

// nodeVM is the VM of node, which the test needs to be a VM node.
func nodeVM(t testing.TB, node string) *vm {
	t.Helper()
	v, err := h.vmNamed(node)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// lvmNodes are the VM nodes' names, in vmNodes' order.
func lvmNodes() []string {
	names := make([]string, len(vmNodes))
	for i, n := range vmNodes {
		names[i] = n.name
	}
	return names
}

// allNodes are every node's names: the VM nodes', then the host node's.
func allNodes() []string { return append(lvmNodes(), hostNode) }

// podVM is the VM a pod runs on.
func podVM(t testing.TB, p *corev1.Pod) *vm {
	t.Helper()
	return nodeVM(t, p.Spec.NodeName)
}
