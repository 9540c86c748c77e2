package main

import (
	"context"
	"flag"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/backend"
	"carve.dev/carve/driver/clustermetrics"
	"carve.dev/carve/driver/csi"
	"carve.dev/carve/driver/metrics"
	"carve.dev/carve/driver/move"
	"carve.dev/carve/driver/nodeloss"
)

// runController serves CSI Identity + Controller for the cluster: volume
// work goes through resources the node agents carry out.
func runController(args []string) error {
	var (
		c            clusterFlags
		endpoint     string
		volumeGroups string
		leaderElect  bool
		leaderNS     string
		transfers    controllerTransferFlags
	)
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	c.register(fs)
	fs.StringVar(&endpoint, "endpoint", "unix:///csi/csi.sock", "CSI endpoint (unix socket) of the sidecars")
	fs.StringVar(&volumeGroups, "volume-groups", "", "comma-separated volume groups StorageClasses may name; the first is the default")
	fs.BoolVar(&leaderElect, "leader-elect", false, "elect a leader among controller replicas")
	fs.StringVar(&leaderNS, "leader-election-namespace", "", "namespace of the leader election lease (default: the pod's)")
	transfers.register(fs)
	logging := loggingFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyLogging(fs, logging, nil); err != nil {
		return err
	}
	if _, err := csi.SocketPath(endpoint); err != nil {
		return fmt.Errorf("--endpoint: %w", err)
	}
	vgs, err := parseVGs(volumeGroups)
	if err != nil {
		return err
	}
	cfg, err := c.restConfig()
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, &c, manager.Options{
		LeaderElection: leaderElect, LeaderElectionID: "controller.lvm.carve.dev", LeaderElectionNamespace: leaderNS,
	})
	if err != nil {
		return err
	}
	b, err := newBackend(cfg, mgr, vgs)
	if err != nil {
		return err
	}
	// The node reports and unfinished operations, read from the cache
	// newBackend watches with, at each scrape (every replica: none of it
	// needs leadership).
	metrics.ReadCluster((&clustermetrics.Reader{Cache: mgr.GetCache()}).Read)
	// Releases what is deleted on a node declared lost; with leadership.
	lost := &nodeloss.Reconciler{Client: mgr.GetClient(), Events: mgr.GetEventRecorder("carve-controller")}
	if err := lost.SetupWithManager(mgr); err != nil {
		return err
	}
	// Walks VolumeMoves (docs/moves.md); with leadership.
	moves := &move.Reconciler{Client: mgr.GetClient(), API: mgr.GetAPIReader(), Backend: b,
		Volumes: csi.NewController(b), Events: mgr.GetEventRecorder("carve-controller")}
	if err := moves.SetupWithManager(mgr); err != nil {
		return err
	}
	// The signer of the node agents' transfer certificates; with
	// leadership.
	if err := addSigner(context.Background(), transfers, b.Client, mgr); err != nil {
		return err
	}
	probe := apiProber{b.Client}
	srv := csi.NewServer(csi.NewIdentity(version, true, probe), csi.NewController(b), nil, nil)
	if err := mgr.Add(csiRunnable{srv: srv, endpoint: endpoint}); err != nil {
		return err
	}
	health := serveHealth(c.healthAddr, probe, false) // metrics: --metrics-address
	defer closeServer(health)
	klog.InfoS("Carve controller starting", "version", version, "volumeGroups", vgs)
	return run(mgr)
}

// newBackend is the controller backend over the manager's cache: the
// cache watches every LogicalVolume, LogicalVolumeSnapshot, group snapshot
// and NodeStorage (what the waits, the lists and GetCapacity read), and its
// watch events wake the waits. Writes, and the reads they depend on, go to the API
// through an uncached client.
func newBackend(cfg *rest.Config, mgr manager.Manager, vgs []string) (*backend.Backend, error) {
	direct, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	changes, err := backend.WatchWith(context.Background(), mgr.GetCache())
	if err != nil {
		return nil, err
	}
	return &backend.Backend{Client: direct, Cache: mgr.GetCache(), Changes: changes, VGs: vgs}, nil
}

// apiProber: the controller works when it can read its resources.
type apiProber struct{ c client.Client }

func (p apiProber) Probe(ctx context.Context) error {
	var list v1alpha1.NodeStorageList
	if err := p.c.List(ctx, &list, client.Limit(1)); err != nil {
		return fmt.Errorf("list NodeStorage: %w", err)
	}
	return nil
}
