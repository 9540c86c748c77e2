package main

import (
	"flag"
	"fmt"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/csi"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/registration"
)

// runNode serves CSI Identity + Node (and the SnapshotMetadata service of
// its snapshots) to kubelet, registers with kubelet,
// and runs the node agent that carries out the controller's resources on
// this node's volume groups.
func runNode(args []string) error {
	var (
		c           clusterFlags
		lf          localFlags
		regSocket   string
		kubeletPath string
		reportEvery time.Duration
		workers     int
	)
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	c.register(fs)
	lf.register(fs, "unix:///var/lib/kubelet/plugins/"+csi.Name+"/csi.sock")
	fs.StringVar(&regSocket, "registration-socket", "/var/lib/kubelet/plugins_registry/"+csi.Name+"-reg.sock",
		"kubelet plugin registration socket")
	fs.StringVar(&kubeletPath, "kubelet-csi-path", "", "the CSI socket's path as kubelet sees it (default: the --endpoint path)")
	fs.DurationVar(&reportEvery, "storage-report-interval", 30*time.Second, "how often NodeStorage is refreshed")
	fs.IntVar(&workers, "agent-workers", agent.DefaultWorkers,
		"LogicalVolumes (and, apart, LogicalVolumeSnapshots and group snapshots) reconciled at once; one volume is never reconciled twice at once")
	logging := loggingFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyLogging(fs, logging, nil); err != nil {
		return err
	}
	if err := lf.validate(); err != nil {
		return err
	}
	if workers < 1 {
		return fmt.Errorf("--agent-workers %d: must be at least 1", workers)
	}
	// The socket kubelet is told: the endpoint's, or another path to the
	// same socket, read by the endpoint's rule.
	kubeletFlag := "--kubelet-csi-path"
	if kubeletPath == "" {
		kubeletPath, kubeletFlag = lf.endpoint, "--endpoint"
	}
	kubeletPath, err := csi.SocketPath(kubeletPath)
	if err != nil {
		return fmt.Errorf("%s: %w", kubeletFlag, err)
	}
	vols, node, closeLVM := lf.build(true)
	defer closeLVM()
	if lf.maxVolumes > 0 {
		klog.InfoS("Attach limit advertised to the scheduler", "maxVolumes", lf.maxVolumes)
	}
	cfg, err := c.restConfig()
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, &c, manager.Options{Cache: agent.CacheOptions(lf.nodeID)})
	if err != nil {
		return err
	}
	if err := addAgent(mgr, lf, vols, reportEvery, workers); err != nil {
		return err
	}
	srv := csi.NewServer(csi.NewIdentity(version, false, vols), nil, node, csi.NewSnapshotMetadata(vols))
	if err := mgr.Add(csiRunnable{srv: srv, endpoint: lf.endpoint}); err != nil {
		return err
	}
	reg := registration.New(csi.Name, kubeletPath, regSocket)
	go func() {
		if err := reg.Serve(); err != nil {
			klog.ErrorS(err, "Registration server stopped")
		}
	}()
	defer reg.Stop()
	health := serveHealth(c.healthAddr, vgCheck(vols), false) // metrics: --metrics-address
	defer closeServer(health)
	klog.InfoS("Carve node starting", "version", version, "node", lf.nodeID, "volumeGroups", lf.volumeGroups)
	return run(mgr)
}

// addAgent registers the reconcilers and the storage reporter, all on the
// manager's client: reads from the node's cache, writes to the API.
func addAgent(mgr manager.Manager, lf localFlags, vols *lvmvol.Manager, every time.Duration, workers int) error {
	c := mgr.GetClient()
	// Events of the events.k8s.io API, as carve-node; those about the
	// cluster-scoped resources land in the default namespace.
	rec := mgr.GetEventRecorder("carve-node")
	storage := &agent.StorageReporter{Client: c, Node: lf.nodeID, Space: vols.Space, Overprovision: lf.overprov, Interval: every,
		Volumes: vols.ListVolumes, Events: rec}
	if err := (&agent.VolumeReconciler{Client: c, Node: lf.nodeID, Volumes: vols, Events: rec, Workers: workers,
		SpaceChanged: storage.RefreshSpace}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&agent.SnapshotReconciler{Client: c, Node: lf.nodeID, Snapshots: vols, Events: rec, Workers: workers,
		SpaceChanged: storage.RefreshSpace}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&agent.GroupSnapshotReconciler{Client: c, Node: lf.nodeID, Groups: vols, Events: rec, Workers: workers}).SetupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Add(storage)
}
