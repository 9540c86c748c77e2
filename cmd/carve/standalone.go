package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver"
	"carve.dev/carve/driver/healthz"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
)

type standaloneFlags struct {
	endpoint     string
	nodeID       string
	volumeGroups string
	maxVolumes   int64
	cmdTimeout   time.Duration
	deviceWait   time.Duration
	overprov     float64
	healthAddr   string
}

func parseStandalone(args []string) (standaloneFlags, error) {
	host, _ := os.Hostname()
	var f standaloneFlags
	fs := flag.NewFlagSet("standalone", flag.ContinueOnError)
	fs.StringVar(&f.endpoint, "endpoint", "unix:///run/carve/csi.sock", "CSI endpoint (unix socket)")
	fs.StringVar(&f.nodeID, "node-id", host, "this node's ID (its topology segment)")
	fs.StringVar(&f.volumeGroups, "volume-groups", "", "comma-separated volume groups to carve from; the first is the default")
	fs.Int64Var(&f.maxVolumes, "max-volumes", 0, "volumes published on this node at once; beyond it ControllerPublishVolume is RESOURCE_EXHAUSTED (0: no limit)")
	fs.DurationVar(&f.cmdTimeout, "command-timeout", runner.DefaultTimeout, "timeout of each lvm/mkfs command")
	fs.DurationVar(&f.deviceWait, "device-wait", 30*time.Second, "how long NodeStage waits for a published device")
	fs.StringVar(&f.healthAddr, "health-address", "", "serve GET /healthz on this address, e.g. 127.0.0.1:9808 (empty: off)")
	fs.Float64Var(&f.overprov, "thin-overprovision-ratio", lvmvol.DefaultOverprovision,
		"thin volumes may promise this many times a thin pool's free space (>= 1)")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.nodeID == "" {
		return f, fmt.Errorf("--node-id is empty and the hostname is unknown")
	}
	if f.overprov < 1 {
		return f, fmt.Errorf("--thin-overprovision-ratio %v: must be at least 1", f.overprov)
	}
	if f.volumeGroups == "" {
		return f, fmt.Errorf("--volume-groups is required")
	}
	for _, vg := range vgList(f.volumeGroups) {
		if err := lvm.ValidateVGName(vg); err != nil {
			return f, fmt.Errorf("--volume-groups: %w", err)
		}
	}
	return f, nil
}

func vgList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// runStandalone wires the CSI services straight onto this node's LVM and
// serves them until SIGINT or SIGTERM.
func runStandalone(args []string) error {
	f, err := parseStandalone(args)
	if err != nil {
		return err
	}
	// lvm2 warns about every descriptor a parent left open (a shell, a
	// container runtime); Go closes its own, so the warnings only bury the
	// real error text.
	run := runner.New(f.cmdTimeout, "LVM_SUPPRESS_FD_WARNINGS=1")
	vols := lvmvol.NewManager(lvm.New(run), lvmvol.ZeroWiper{Run: run}, f.nodeID, vgList(f.volumeGroups))
	vols.LimitPublished(int(f.maxVolumes))
	vols.SetOverprovision(f.overprov)
	srv := driver.NewServer(
		driver.NewIdentity(version, true, vols),
		driver.NewController(vols),
		driver.NewNode(driver.NodeConfig{NodeID: f.nodeID, MaxVolumes: f.maxVolumes, DeviceWait: f.deviceWait},
			vols, nodefs.New(run.AsExecInterface())),
	)
	health := serveHealth(f.healthAddr, vols)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-stop
		klog.InfoS("Stopping on signal", "signal", s)
		if health != nil {
			_ = health.Close()
		}
		srv.Stop()
	}()
	klog.InfoS("Carve standalone starting", "version", version, "node", f.nodeID, "volumeGroups", f.volumeGroups)
	return srv.Serve(f.endpoint)
}

// serveHealth serves /healthz on addr in the background; nil when addr is
// empty. A listener that fails is fatal to the probe only, and logged.
func serveHealth(addr string, p healthz.Prober) *http.Server {
	if addr == "" {
		return nil
	}
	srv := &http.Server{Addr: addr, Handler: healthz.Handler(p), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Health endpoint stopped", "address", addr)
		}
	}()
	klog.InfoS("Serving /healthz", "address", addr)
	return srv
}
