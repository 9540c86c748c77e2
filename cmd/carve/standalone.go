package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver"
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
	run := runner.New(f.cmdTimeout)
	vols := lvmvol.NewManager(lvm.New(run), lvmvol.ZeroWiper{Run: run}, f.nodeID, vgList(f.volumeGroups))
	vols.LimitPublished(int(f.maxVolumes))
	vols.SetOverprovision(f.overprov)
	srv := driver.NewServer(
		driver.NewIdentity(version, true, vols),
		driver.NewController(vols),
		driver.NewNode(driver.NodeConfig{NodeID: f.nodeID, MaxVolumes: f.maxVolumes, DeviceWait: f.deviceWait},
			vols, nodefs.New(run.AsExecInterface())),
	)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-stop
		klog.InfoS("Stopping on signal", "signal", s)
		srv.Stop()
	}()
	klog.InfoS("Carve standalone starting", "version", version, "node", f.nodeID, "volumeGroups", f.volumeGroups)
	return srv.Serve(f.endpoint)
}
