package main

import (
	"flag"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"carve.dev/carve/driver"
	"carve.dev/carve/driver/cluster/agent"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/registration"
)

// runNode serves CSI Identity + Node to kubelet, registers with kubelet,
// and runs the node agent that carries out the controller's resources on
// this node's volume groups.
func runNode(args []string) error {
	var (
		c           clusterFlags
		lf          localFlags
		regSocket   string
		kubeletPath string
		reportEvery time.Duration
	)
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	c.register(fs)
	lf.register(fs, "unix:///var/lib/kubelet/plugins/"+driver.Name+"/csi.sock")
	fs.StringVar(&regSocket, "registration-socket", "/var/lib/kubelet/plugins_registry/"+driver.Name+"-reg.sock",
		"kubelet plugin registration socket")
	fs.StringVar(&kubeletPath, "kubelet-csi-path", "", "the CSI socket's path as kubelet sees it (default: the --endpoint path)")
	fs.DurationVar(&reportEvery, "storage-report-interval", 30*time.Second, "how often NodeStorage is refreshed")
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := lf.validate(); err != nil {
		return err
	}
	vols, node := lf.build()
	if lf.maxVolumes > 0 {
		klog.InfoS("Attach limit advertised to the scheduler", "maxVolumes", lf.maxVolumes)
	}
	cfg, err := c.restConfig()
	if err != nil {
		return err
	}
	mgr, direct, err := newManager(cfg, &c, manager.Options{})
	if err != nil {
		return err
	}
	if err := addAgent(mgr, direct, lf, vols, reportEvery); err != nil {
		return err
	}
	srv := driver.NewServer(driver.NewIdentity(version, false, vols), nil, node)
	if err := mgr.Add(csiRunnable{srv: srv, endpoint: lf.endpoint}); err != nil {
		return err
	}
	if kubeletPath == "" {
		kubeletPath = socketPath(lf.endpoint)
	}
	reg := registration.New(driver.Name, kubeletPath, regSocket)
	go func() {
		if err := reg.Serve(); err != nil {
			klog.ErrorS(err, "Registration server stopped")
		}
	}()
	defer reg.Stop()
	health := serveHealth(c.healthAddr, vols, false) // metrics: --metrics-address
	defer closeServer(health)
	klog.InfoS("Carve node starting", "version", version, "node", lf.nodeID, "volumeGroups", lf.volumeGroups)
	return run(mgr)
}

// addAgent registers the reconcilers (on the manager's cached client) and
// the storage reporter (on the direct one: it reads back the NodeStorage it
// may have just created, which the cache may not show yet).
func addAgent(mgr manager.Manager, direct client.Client, lf localFlags, vols *lvmvol.Manager, every time.Duration) error {
	c := mgr.GetClient()
	// Events of the events.k8s.io API, as carve-node; those about the
	// cluster-scoped resources land in the default namespace.
	rec := mgr.GetEventRecorder("carve-node")
	if err := (&agent.VolumeReconciler{Client: c, Node: lf.nodeID, Volumes: vols, Events: rec}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&agent.SnapshotReconciler{Client: c, Node: lf.nodeID, Snapshots: vols, Events: rec}).SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Add(&agent.StorageReporter{Client: direct, Node: lf.nodeID, Space: vols.Space, Overprovision: lf.overprov, Interval: every,
		Volumes: vols.ListVolumes})
}

// socketPath strips unix:// from an endpoint.
func socketPath(endpoint string) string {
	return filepath.Clean(strings.TrimPrefix(endpoint, "unix://"))
}
