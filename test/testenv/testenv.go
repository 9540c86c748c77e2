// Package testenv prepares real LVM for the integration suites that run as
// root inside the test VM (scripts/test-vm.sh): a private LVM configuration,
// volume groups on the VM's scratch disks, and a running `carve standalone`.
package testenv

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
	"carve.dev/carve/test/fixture"
	"golang.org/x/sys/unix"
	"k8s.io/mount-utils"
)

// Disk returns the scratch disk named by the environment variable env:
// these tests wipe the disk they are given. Unset, or without root, the
// fixture is missing (fixture.Missing: a skip by hand, a failure under
// scripts/test-vm.sh).
func Disk(t *testing.T, env string) string {
	t.Helper()
	d := os.Getenv(env)
	if d == "" {
		fixture.Missing(t, "%s is not set: this test needs a scratch disk it may wipe (run it through scripts/test-vm.sh)", env)
	}
	if os.Geteuid() != 0 {
		fixture.Missing(t, "needs root")
	}
	return d
}

// PrivateLVM points lvm2, for this test and the processes it starts, at a
// fresh private configuration instead of the machine's /etc/lvm, and returns
// a client for it.
//
// In the VM's production profile (CARVE_VM_PROFILE=production, set by
// scripts/test-vm.sh) lvm2 keeps the machine's configuration instead, as
// Carve's node DaemonSet does with the host's /etc/lvm: udev sync and rules
// with udevd running, monitoring by dmeventd, autoactivation and the
// devices file all as the guest set them up (scripts/vm/guest.sh).
func PrivateLVM(t *testing.T) *lvm.Client {
	t.Helper()
	env := []string{"LVM_SUPPRESS_FD_WARNINGS=1"}
	if !ProductionProfile() {
		var err error
		if env, err = lvm.WritePrivateConfig(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return lvm.New(runner.New(0))
}

// NewVG creates volume group name on disks and removes it, with its PVs,
// when the test ends.
func NewVG(t *testing.T, c *lvm.Client, name string, disks ...string) {
	t.Helper()
	ctx := context.Background()
	if err := c.CreateVG(ctx, name, disks...); err != nil {
		t.Fatalf("create VG: %v", err)
	}
	t.Cleanup(func() {
		if err := c.RemoveVG(ctx, name); err != nil {
			t.Errorf("remove VG %s: %v", name, err)
		}
		if err := c.RemovePVs(ctx, disks...); err != nil {
			t.Errorf("remove PVs: %v", err)
		}
	})
}

// StartCarve is the one way tests run carve: `carve standalone args...`
// as o says (Launch), stopped with SIGTERM when the test ends, its log's
// path then in the test log. A test that restarts or kills carve itself
// calls Launch and owns the process.
func StartCarve(t *testing.T, o Options, args ...string) *Process {
	t.Helper()
	p := Launch(t, o, args...)
	t.Cleanup(func() {
		p.Stop()
		t.Logf("carve log: %s", p.log.Name())
	})
	return p
}

// Bin is the carve binary tests run: $CARVE_BIN, which scripts/test-vm.sh
// sets; a test without it fails as a missing fixture (fixture.Missing).
func Bin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("CARVE_BIN")
	if bin == "" {
		fixture.Missing(t, "CARVE_BIN is not set: build cmd/carve and point CARVE_BIN at it")
	}
	return bin
}

// Options say how Launch starts carve.
type Options struct {
	Bin    string   // the carve binary; "": Bin's
	Socket string   // the CSI socket's path, which a restart may reuse; "": one in a temporary directory
	Cgroup string   // a cgroup v2 directory to start in; "": carve's own
	Env    []string // extra "K=V" entries
}

// Process is a running `carve standalone`.
type Process struct {
	Endpoint string
	cmd      *exec.Cmd
	exited   chan struct{}
	log      *os.File
}

// Launch starts `carve standalone args...` as o says and returns once it
// accepts connections. The caller stops it (Stop) or sees it die (Exited).
// Tests stage and publish in their temporary directories, so the path
// root is the temporary directory's root unless args give one
// (--path-root).
func Launch(t *testing.T, o Options, args ...string) *Process {
	t.Helper()
	if o.Bin == "" {
		o.Bin = Bin(t)
	}
	if o.Socket == "" {
		o.Socket = filepath.Join(t.TempDir(), "csi.sock")
	}
	logf, err := os.OpenFile(filepath.Join(logDir(t), "carve-"+sanitize(t.Name())+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"standalone", "--endpoint", "unix://" + o.Socket, "-v=4"}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--path-root=") }) {
		base = append(base, "--path-root="+filepath.Clean(os.TempDir()))
	}
	cmd := exec.Command(o.Bin, append(base, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), o.Env...)
	// Its own process group, so that Kill takes the commands it runs too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if o.Cgroup != "" {
		dir, err := os.Open(o.Cgroup)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = dir.Close() }()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(dir.Fd())
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start carve: %v", err)
	}
	p := &Process{Endpoint: "unix://" + o.Socket, cmd: cmd, exited: make(chan struct{}), log: logf}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	waitForSocket(t, o.Socket, p)
	return p
}

// PID is the process's ID (for its memory figures).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Log is the path of the process's log file.
func (p *Process) Log() string { return p.log.Name() }

// Exited reports whether the process ended within d.
func (p *Process) Exited(d time.Duration) bool {
	select {
	case <-p.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// Stop ends the process with SIGTERM and waits for it.
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.exited
	_ = p.log.Close()
}

// Kill ends the process and the commands it runs (lvm, mkfs,
// blkdiscard...) with SIGKILL, as a container runtime or systemd does when
// the process dies, and waits for the process.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	_ = p.log.Close()
}

// startGuard bounds carve's start, a hang guard: at start carve repairs
// what a killed lvm2 command left (dmsetup, lvm2 runs), which in the VM
// of a cold run, beside builds and a second VM, took several times a
// quiet run's second or two. A slow start is late, never failed.
const startGuard = 5 * time.Minute

// waitForSocket waits until carve accepts connections on sock. The
// socket file alone is not enough: it exists from bind(), and a client
// dialing before listen() is refused (seen on a loaded machine, where the
// window is long enough to hit).
func waitForSocket(t *testing.T, sock string, p *Process) {
	t.Helper()
	deadline := time.Now().Add(startGuard)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
			_ = c.Close()
			return
		}
		if p.Exited(0) {
			t.Fatalf("carve exited early: %v (its log: %s)", p.cmd.ProcessState, p.log.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("carve did not accept connections on %s within %v", sock, startGuard)
}

// logDir is where process logs go: $CARVE_TEST_LOGS (a share the VM harness
// brings back to the host) or the test's temp dir.
func logDir(t *testing.T) string {
	if d := os.Getenv("CARVE_TEST_LOGS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err == nil {
			return d
		}
	}
	return t.TempDir()
}

func sanitize(name string) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(name)
}

// FreeLoopbackAddr is a loopback address with a port nothing listens on,
// for carve's --health-address (its /metrics).
func FreeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// MountsUnder lists the mounts strictly inside dir, in mountinfo's order
// (a mount before those made on top of it).
func MountsUnder(t *testing.T, dir string) []mount.MountInfo {
	t.Helper()
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(infos, func(mi mount.MountInfo) bool { return !strings.HasPrefix(mi.MountPoint, dir+"/") })
}

// UnmountAll unmounts every mount inside dir, the latest first, with
// umount2's flags (0, or unix.MNT_DETACH where the device may be failing).
func UnmountAll(t *testing.T, dir string, flags int) {
	t.Helper()
	ms := MountsUnder(t, dir)
	for i := len(ms) - 1; i >= 0; i-- {
		if err := unix.Unmount(ms[i].MountPoint, flags); err != nil {
			t.Errorf("unmount %s: %v", ms[i].MountPoint, err)
		}
	}
}

// WriteSynced writes data to the file at path and fsyncs it and its
// directory: once it returns nil, the write is acknowledged. The error
// is returned, since under a fault it is expected.
func WriteSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	if err := errors.Join(werr, serr, f.Close()); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// ProductionProfile reports whether the suite runs in the VM's production
// profile (udevd, autoactivation, dmeventd, the devices file: run.sh
// --profile production).
func ProductionProfile() bool {
	return os.Getenv("CARVE_VM_PROFILE") == "production"
}
