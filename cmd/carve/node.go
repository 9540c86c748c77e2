package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/csi"
	"carve.dev/carve/driver/disks"
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
		diskDecl    string
		transfers   nodeTransferFlags
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
	fs.StringVar(&diskDecl, "disk-declaration", "",
		"file of the declaration of which disks make which volume groups on which nodes (a ConfigMap's key, mounted; read each minute, none there: nothing declared); empty: the agent takes no disks")
	transfers.register(fs)
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
	cfg, err := c.restConfig()
	if err != nil {
		return err
	}
	moves, err := newNodeTransfers(cfg, transfers, lf.nodeID)
	if err != nil {
		return err
	}
	st := lf.build(true, moves.remote())
	defer st.closeLVM()
	vols, node := st.vols, st.node
	if lf.maxVolumes > 0 {
		klog.InfoS("Attach limit advertised to the scheduler", "maxVolumes", lf.maxVolumes)
	}
	mgr, err := newManager(cfg, &c, manager.Options{Cache: agent.CacheOptions(lf.nodeID)})
	if err != nil {
		return err
	}
	storage, err := addAgent(mgr, lf, vols, reportEvery, workers)
	if err != nil {
		return err
	}
	if err := addDiskKeeper(mgr, lf.nodeID, lf.vgs, st, storage, diskDecl); err != nil {
		return err
	}
	if err := moves.add(mgr, vols, storage); err != nil {
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
func addAgent(mgr manager.Manager, lf localFlags, vols *lvmvol.Manager, every time.Duration, workers int) (*agent.StorageReporter, error) {
	c := mgr.GetClient()
	// Events of the events.k8s.io API, as carve-node; those about the
	// cluster-scoped resources land in the default namespace.
	rec := mgr.GetEventRecorder("carve-node")
	storage := &agent.StorageReporter{Client: c, Node: lf.nodeID, Space: vols.Space, Overprovision: lf.overprov, Interval: every,
		Volumes: vols.ListVolumes, Events: rec}
	if err := (&agent.VolumeReconciler{Client: c, Node: lf.nodeID, Volumes: vols, Events: rec, Workers: workers,
		SpaceChanged: storage.RefreshSpace}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&agent.SnapshotReconciler{Client: c, Node: lf.nodeID, Snapshots: vols, Events: rec, Workers: workers,
		SpaceChanged: storage.RefreshSpace}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	if err := (&agent.GroupSnapshotReconciler{Client: c, Node: lf.nodeID, Groups: vols, Events: rec, Workers: workers}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	return storage, mgr.Add(storage)
}

// addDiskKeeper registers the disk setup when a declaration's file is
// named: its lvm2 commands go through the node's runner and report cache
// (a VG made or grown is read afresh), its probes through the runner.
func addDiskKeeper(mgr manager.Manager, nodeID string, served []string, st stack, storage *agent.StorageReporter, decl string) error {
	if decl == "" {
		return nil
	}
	setup := &agent.DiskSetup{Node: nodeID, Served: served, LVM: st.lvm,
		Scan: func() ([]disks.Disk, error) { return disks.Scan("/sys/block", "/dev") },
		Probe: func(ctx context.Context, dev string) (disks.Signatures, error) {
			return disks.Probe(ctx, st.run, dev)
		}}
	klog.InfoS("Disks to volume groups by declaration", "declaration", decl)
	return mgr.Add(&agent.DiskKeeper{Setup: setup, Declaration: decl, Nodes: mgr.GetAPIReader(), Storage: storage})
}
