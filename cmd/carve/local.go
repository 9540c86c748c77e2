package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/crashpoint"
	"carve.dev/carve/driver/crypt"
	"carve.dev/carve/driver/csi"
	"carve.dev/carve/driver/healthz"
	"carve.dev/carve/driver/iolimit"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/mapper"
	"carve.dev/carve/driver/metrics"
	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/nodepath"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
)

// DefaultLVMShells is how many lvm2 shells run Carve's lvm2 commands
// unless --lvm-shells says otherwise: as many as the node agent's
// workers (agent.DefaultWorkers), so a burst of reconciles finds one each.
// An operation's lvm2 commands in a shell cost a fifth of the same as
// processes in the test VM (docs/performance.md), and an idle shell holds
// about 12 MiB and no device or lock.
const DefaultLVMShells = 4

// localFlags configure the work on this node's LVM, shared by standalone
// and node.
type localFlags struct {
	endpoint     string
	nodeID       string
	volumeGroups string
	vgs          []string
	maxVolumes   int64
	cmdTimeout   time.Duration
	lvmShells    int
	lvmCacheAge  time.Duration
	deviceWait   time.Duration
	overprov     float64
	pathRoot     string
	root         nodepath.Root
	pbkdf        crypt.PBKDF
	cgroupRoot   string
}

func (f *localFlags) register(fs *flag.FlagSet, defaultEndpoint string) {
	host, _ := os.Hostname()
	fs.StringVar(&f.endpoint, "endpoint", defaultEndpoint, "CSI endpoint (unix socket)")
	fs.StringVar(&f.nodeID, "node-id", host, "this node's ID (its topology segment): its Kubernetes node name in cluster mode")
	fs.StringVar(&f.volumeGroups, "volume-groups", "", "comma-separated volume groups to carve from; the first is the default")
	fs.Int64Var(&f.maxVolumes, "max-volumes", 0, "volumes published on this node at once; beyond it ControllerPublishVolume is RESOURCE_EXHAUSTED (0: no limit)")
	fs.DurationVar(&f.cmdTimeout, "command-timeout", runner.DefaultTimeout,
		"timeout of each metadata command (lvm, blkid); data work (zeroing, copies, mkfs, fsck, filesystem growth) gets a deadline sized for the volume instead")
	fs.IntVar(&f.lvmShells, "lvm-shells", DefaultLVMShells,
		"run lvm2 commands in up to this many long-lived lvm2 shells instead of a process each (they start when first needed; lvm2's lvmdbusd "+
			"command profile must be installed, else commands run as processes; commands the shells cannot carry or that find them busy "+
			"still run as processes; 0: a process per command)")
	fs.DurationVar(&f.lvmCacheAge, "lvm-cache-max-age", 10*time.Minute,
		"queries (GetCapacity, ListVolumes, NodeGetVolumeStats, the storage report) may be answered from an lvm report this old; "+
			"Carve's own changes refresh it at once, and so do, within a second, changes to the VG's metadata on its PVs (lvm2 by hand, dmeventd), "+
			"its thin pools' usage and lvm2's device selection (lvm.conf, the devices file); "+
			"this bounds how long other changes made outside Carve (a failed disk, a raid leg's sync) take to show (0: every query runs lvm2)")
	fs.DurationVar(&f.deviceWait, "device-wait", 30*time.Second, "how long NodeStage waits for a published device")
	fs.Float64Var(&f.overprov, "thin-overprovision-ratio", volume.DefaultOverprovision,
		"thin volumes may promise this many times a thin pool's free space (>= 1)")
	fs.StringVar(&f.pathRoot, "path-root", nodepath.DefaultRoot,
		"the CO's directory: every staging and target path must lie inside it, or the node call is refused (kubelet: its root directory)")
	fs.StringVar(&f.cgroupRoot, "cgroup-root", iolimit.DefaultRoot,
		"the host's cgroup v2 hierarchy, where kubelet keeps its pods' cgroups: volumes' IO limits go into their io.max "+
			"(in a container: the host's /sys/fs/cgroup mounted in; empty: this node applies no IO limits, and refuses volumes that have some)")
	fs.IntVar(&f.pbkdf.MemoryKiB, "luks-pbkdf-memory", crypt.DefaultPBKDF.MemoryKiB,
		"encrypted volumes: argon2id's memory cost in KiB for new LUKS2 keyslots (every open of the volume needs this much memory)")
	fs.IntVar(&f.pbkdf.Iterations, "luks-pbkdf-iterations", crypt.DefaultPBKDF.Iterations,
		"encrypted volumes: argon2id's time cost (passes) for new LUKS2 keyslots")
}

func (f *localFlags) validate() error {
	if f.nodeID == "" {
		return errors.New("--node-id is empty and the hostname is unknown")
	}
	if err := volume.ValidateNodeID(f.nodeID); err != nil {
		return fmt.Errorf("--node-id: %w", err)
	}
	if _, err := csi.SocketPath(f.endpoint); err != nil {
		return fmt.Errorf("--endpoint: %w", err)
	}
	if f.lvmShells < 0 {
		return fmt.Errorf("--lvm-shells %d: must not be negative", f.lvmShells)
	}
	if f.lvmCacheAge < 0 {
		return fmt.Errorf("--lvm-cache-max-age %v: must not be negative", f.lvmCacheAge)
	}
	if f.overprov < 1 {
		return fmt.Errorf("--thin-overprovision-ratio %v: must be at least 1", f.overprov)
	}
	if err := f.pbkdf.Validate(); err != nil {
		return fmt.Errorf("--luks-pbkdf-memory, --luks-pbkdf-iterations: %w", err)
	}
	if f.cgroupRoot != "" && !filepath.IsAbs(f.cgroupRoot) {
		return fmt.Errorf("--cgroup-root %q: must be an absolute path", f.cgroupRoot)
	}
	root, err := nodepath.NewRoot(f.pathRoot)
	if err != nil {
		return fmt.Errorf("--path-root: %w", err)
	}
	f.root = root
	vgs, err := parseVGs(f.volumeGroups)
	f.vgs = vgs
	return err
}

// parseVGs reads a comma-separated list of volume group names.
func parseVGs(s string) ([]string, error) {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			if err := lvm.ValidateVGName(v); err != nil {
				return nil, fmt.Errorf("--volume-groups: %w", err)
			}
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--volume-groups is required")
	}
	return out, nil
}

// stack is what build makes: the volumes (the LVM semantics), the CSI
// Node service, and below them the lvm2 reports' cache and the runner
// every command of this node goes through.
type stack struct {
	vols *lvmvol.Manager
	node *csi.Node
	lvm  *lvm.Cache
	run  *runner.Exec
	// closeLVM ends the lvm2 shells: call it on the way out, after the
	// services have stopped, or they outlive carve in its cgroup.
	closeLVM func()
}

// build makes the LVM semantics and the CSI Node service on this node, and
// repairs what a carve killed mid-command left. background: the Manager
// leaves long data work in the background (carve node's agent; see
// lvmvol.Config.BackgroundDataWork); remote receives other nodes'
// snapshots (carve node's transfers; nil: none).
func (f *localFlags) build(background bool, remote lvmvol.Remote) stack {
	var vols *lvmvol.Manager
	var node *csi.Node
	run := runner.New(f.cmdTimeout, lvmEnv(udevControl)...)
	run.Observe = crashpoint.Wrap(metrics.Command)
	closeLVM := func() {}
	if f.lvmShells > 0 {
		run.Shell = runner.NewShell(f.lvmShells)
		closeLVM = func() { _ = run.Shell.Close() }
	}
	// Device-mapper's ioctls are crash points as commands are (the crash
	// tests stop carve after one), but no process: not in the commands'
	// metrics.
	layers := mapper.NewLinear(mapper.Kernel{Observe: crashpoint.Wrap(nil)})
	cache := lvm.NewCache(lvm.New(run), f.lvmCacheAge)
	cfg := lvmvol.Config{LVM: cache, Cache: cache, Wiper: lvmvol.ZeroWiper{Run: run},
		Node: f.nodeID, VolumeGroups: f.vgs, MaxPublished: int(f.maxVolumes), Overprovision: f.overprov, Layers: layers,
		Remote: remote}
	if background {
		// Copies into clones and restores, and wipes, may take hours: the
		// agent leaves them in the background so that they hold no worker
		// (CSI calls in standalone mode wait for them instead).
		cfg.BackgroundDataWork, cfg.DataGrace = true, agent.DataGrace
	}
	// The Manager and the node's service use each other: the node reads
	// volumes through the Manager, and the Manager's ModifyVolume has the
	// node put changed IO limits on the pods using a volume, in the middle
	// of its steps (see lvmvol.LimitsApplier for why it stays there). The
	// Manager calls it only from ModifyVolume, never while being made, so
	// it gets a function that calls node, which is set before build
	// returns.
	cfg.ApplyLimits = func(ctx context.Context, id volume.ID) error { return node.ApplyLimits(ctx, id) }
	vols = lvmvol.NewManager(cfg)
	nodeCfg := csi.NodeConfig{NodeID: f.nodeID, MaxVolumes: f.maxVolumes, DeviceWait: f.deviceWait,
		PathRoot: f.root, Crypt: crypt.New(run, f.pbkdf), Layers: layers}
	if f.cgroupRoot != "" {
		nodeCfg.Cgroups = &iolimit.Cgroups{Root: f.cgroupRoot}
	}
	node = csi.NewNode(nodeCfg, vols, nodefs.New(run.AsExecInterface()))
	// The start-up repairs, before anything is served, in this order: a
	// layer left suspended would hang the lvm2 commands of the others.
	ctx := context.Background()
	vols.ResumeSuspendedLayers(ctx)
	vols.RepairInterruptedLVM(ctx)
	vols.MakeMissingDeviceNodes(ctx)
	vols.ReleaseMetadataSnapshots(ctx)
	return stack{vols: vols, node: node, lvm: cache, run: run, closeLVM: closeLVM}
}

// udevControl is udevd's control socket: present where udev runs.
const udevControl = "/run/udev/control"

// lvmEnv is the environment of Carve's lvm commands. Without a running
// udev (a container, a minimal host) lvm2 would wait for udev to create
// device nodes that never come, unless the host's lvm.conf (which the node
// DaemonSet shares) says otherwise; DM_DISABLE_UDEV=1 makes lvm2 and
// libdevmapper manage /dev themselves.
func lvmEnv(udevControlPath string) []string {
	// lvm2 warns about every descriptor a parent left open (a shell, a
	// container runtime); Go closes its own, so the warnings only bury the
	// real error text.
	env := []string{"LVM_SUPPRESS_FD_WARNINGS=1"}
	if _, err := os.Stat(udevControlPath); err != nil {
		env = append(env, "DM_DISABLE_UDEV=1")
	}
	return env
}

// vgCheck is the probe of a process that serves volume groups: their
// check (lvmvol.Manager.Probe) in the background, at most every 20 s, and a
// check running for 2 minutes counts as hung (healthz.Background says why).
// With kubelet's probe every 30 s and 3 failures, a hung lvm2 restarts
// carve node within about 4 minutes; a busy disk does not.
func vgCheck(p healthz.Prober) healthz.Prober {
	return healthz.NewBackground(p, 20*time.Second, 2*time.Minute)
}

// serveHealth serves /healthz (and, with metrics, Prometheus /metrics) on
// addr in the background; nil when addr is empty. A listener that fails is
// fatal to the probe only, and logged.
func serveHealth(addr string, p healthz.Prober, withMetrics bool) *http.Server {
	if addr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", healthz.Handler(p))
	if withMetrics {
		mux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry(), promhttp.HandlerOpts{}))
	}
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Health endpoint stopped", "address", addr)
		}
	}()
	klog.InfoS("Serving /healthz", "address", addr)
	return srv
}

func closeServer(s *http.Server) {
	if s != nil {
		_ = s.Close()
	}
}
