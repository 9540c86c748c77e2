//go:build e2e

// Package e2e runs Carve in cluster mode on real Kubernetes components, the
// way a user runs it (scripts/e2e.sh builds everything and runs this): a
// loopback control plane; a node on the host (containerd, runc, kubelet)
// where the controller Deployment and snapshot-controller run as pods; two
// QEMU VM nodes on real LVM (containerd, runc, kubelet), booted as users'
// nodes are (udevd, autoactivation, dmeventd, the devices file), where the
// node DaemonSet's pods and the workloads run: the scheduler places each
// claim on one of them. Carve is installed from a release
// (scripts/release.sh): deploy/'s manifests and Helm chart with every
// image pinned by digest, the images loaded from the release's archives as
// deploy/README.md tells a user (imported, never pulled), and workload
// containers write and read the data themselves.
//
// Scenarios that change what the others see (a full VG, killed or replaced
// Carve pods, a throttled node) run one at a time; those that touch only
// their own claims call t.Parallel and so run together after them, their
// pods starting side by side on the VM nodes as a busy node's do.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"carve.dev/carve/driver/api/v1alpha1"
)

const (
	// The VM nodes (vmNodes): a test that needs a given one names it.
	vmNode     = "carve-vm"
	vmNode2    = "carve-vm2"
	driverNS   = "carve-system"
	driverName = "lvm.carve.dev"
)

// harness is everything TestMain starts; tests reach it through h.
type harness struct {
	repo, work, logs string
	kbin, crdDir     string
	addons, vmexec   string
	adminKC          string
	kc               client.Client
	procs            map[string]*proc
	vms              map[string]*vm // by node name; vmOf
	vmsMu            sync.Mutex
	// images: name -> OCI archive (the release's carve and sidecars;
	// snapshot-controller, pause, busybox)
	images     map[string]string
	release    string   // scripts/release.sh's output: images, manifests, chart
	loop       string   // the host node's PV
	hostLVMEnv []string // its private LVM configuration
	madeDirs   []string // mount points made on the machine, removed at teardown
	stopProxy  func()   // the kubernetes Service's forwarder
	// Carve's Helm release has replaced the kustomize install
	// (TestHelmTakesOver).
	helmInstalled bool
}

var h *harness

func TestMain(m *testing.M) {
	// controller-runtime's clients log through klog, as carve's do; unset,
	// the first client made after 30 s prints a stack trace saying so.
	ctrllog.SetLogger(klog.NewKlogr())
	var err error
	h, err = setUp()
	code := 1
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e setup failed: %v\n", err)
	} else {
		code = m.Run()
	}
	if h != nil {
		// What a failed test left behind is its own failure's doing:
		// only a passing run must leave nothing.
		if err := h.tearDown(code == 0); err != nil {
			fmt.Fprintf(os.Stderr, "e2e teardown: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func env(name string) string {
	v := os.Getenv(name)
	if v == "" {
		panic(name + " is not set: run the e2e test through scripts/e2e.sh")
	}
	return v
}

func setUp() (*harness, error) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	x := &harness{repo: repo, work: env("CARVE_E2E_WORK"), kbin: env("CARVE_E2E_K8S_BIN"),
		crdDir: env("CARVE_E2E_K8S_CRD"), addons: env("CARVE_E2E_K8S_ADDONS"), vmexec: env("CARVE_E2E_VMEXEC"),
		release: env("CARVE_E2E_RELEASE"), procs: map[string]*proc{}}
	if x.images, err = imageArchives(x.release, env("CARVE_E2E_IMAGES")); err != nil {
		return x, err
	}
	x.logs = filepath.Join(x.work, "logs")
	x.adminKC = filepath.Join(x.work, "cluster", "admin.kubeconfig")
	if err := os.MkdirAll(x.logs, 0o755); err != nil {
		return x, err
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"control plane", x.clusterUp},
		{"host node", x.startHostNode},
		{"VM nodes", x.startVMs},
		{"snapshot add-on", x.installSnapshotAddon},
		{"Carve", x.installCarve},
		{"containers only", x.checkContainerised},
	}
	for _, s := range steps {
		t := time.Now()
		if err := s.fn(); err != nil {
			return x, fmt.Errorf("%s: %w", s.name, err)
		}
		logf("setup: %s in %s", s.name, time.Since(t).Round(100*time.Millisecond))
	}
	return x, nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (x *harness) clusterUp() error {
	if err := x.run(filepath.Join(x.repo, "scripts/k8s/cluster.sh"), "up", filepath.Join(x.work, "cluster")); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", x.adminKC)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	x.kc, err = client.New(cfg, client.Options{Scheme: scheme})
	return err
}

func (x *harness) kubectlPath() string { return filepath.Join(x.kbin, "kubectl") }

// kubectl runs kubectl as the cluster admin and returns its stdout.
func (x *harness) kubectl(args ...string) (string, error) {
	cmd := exec.Command(x.kubectlPath(), append([]string{"--kubeconfig=" + x.adminKC}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), errText(err))
	}
	return string(out), nil
}

// tearDown goes in order: Carve's pods first (kubelets stop them and
// unmount what they mounted), then the nodes, then the control plane.
// With check, it fails if the nodes still hold anything of a pod once the
// pods are gone (checkNothingLeft). Whatever still runs after ends with the
// test's PID namespace.
func (x *harness) tearDown(check bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if x.kc != nil {
		x.uninstall()
		if check {
			err = x.checkNothingLeft()
		}
	}
	for node, v := range x.vms {
		v.shutdown(ctx)
		_ = os.RemoveAll(x.vmDisks(node))
	}
	x.stopHostNode()
	for name := range x.procs {
		x.stopProc(name, false)
	}
	if _, err := os.Stat(filepath.Join(x.work, "cluster")); err == nil {
		_ = x.run(filepath.Join(x.repo, "scripts/k8s/cluster.sh"), "down", filepath.Join(x.work, "cluster"))
	}
	logf("logs are in %s", x.logs)
	return err
}

// run runs a command with its output on stderr.
func (x *harness) run(argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
}

// proc is a host process standing in for a container, restarted when it
// exits as kubelet restarts containers (restartPolicy Always): the
// sidecars exit on purpose when they lose the CSI socket.
type proc struct {
	name, log string
	argv, env []string
	mu        sync.Mutex
	cmd       *exec.Cmd
	stopping  chan struct{}
	done      chan struct{}
}

func (x *harness) startProc(name string, argv, env []string) error {
	p := &proc{name: name, log: filepath.Join(x.logs, name+".log"), argv: argv, env: env,
		stopping: make(chan struct{}), done: make(chan struct{})}
	exited, err := p.spawn()
	if err != nil {
		return err
	}
	go p.supervise(exited)
	x.procs[name] = p
	return nil
}

// spawn starts the command once; the channel closes when it has exited.
func (p *proc) spawn() (<-chan struct{}, error) {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	_, _ = fmt.Fprintf(f, "=== %s start: %q\n", time.Now().Format(time.DateTime), p.argv)
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Killed with the test binary, whatever way it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", p.name, err)
	}
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		_, _ = fmt.Fprintf(f, "=== %s exit: %v\n", time.Now().Format(time.DateTime), err)
		_ = f.Close()
		close(exited)
	}()
	return exited, nil
}

func (p *proc) supervise(exited <-chan struct{}) {
	defer close(p.done)
	for {
		<-exited
		select {
		case <-p.stopping:
			return
		case <-time.After(time.Second):
		}
		var err error
		if exited, err = p.spawn(); err != nil {
			logf("%v", err)
			return
		}
	}
}

func (p *proc) signal(sig os.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.cmd.Process.Signal(sig)
}

// stopProc stops a host process: SIGTERM (SIGKILL with crash, as a node
// losing power would), waiting for it to exit.
func (x *harness) stopProc(name string, crash bool) {
	p := x.procs[name]
	if p == nil {
		return
	}
	close(p.stopping)
	sig := syscall.SIGTERM
	if crash {
		sig = syscall.SIGKILL
	}
	p.signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.signal(syscall.SIGKILL)
		<-p.done
	}
	delete(x.procs, name)
}

// fullRunOnly skips a long scenario in make test's run (-test.short), the
// gate CI runs on a fresh machine in under an hour: the scenarios left in
// it take each of Carve's flows through Kubernetes once (provision,
// attach, stage, publish, block and access modes, snapshot and restore,
// resize, capacity and topology, restarts, a node kept to its own volumes).
// The ones skipped here go deeper into a flow or run for minutes (node
// loss, group snapshots, encryption, limits, modify, Helm, soak); make
// test-full runs them, as every scenario ran in make test until a cold run
// was measured at two hours.
func fullRunOnly(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a long scenario: make test-full runs it (make test passes -test.short)")
	}
}
