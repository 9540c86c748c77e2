package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/csi"
)

// clusterFlags are the flags both cluster-mode commands take.
type clusterFlags struct {
	kubeconfig  string
	metricsAddr string
	healthAddr  string
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (empty: in-cluster configuration)")
	fs.StringVar(&c.metricsAddr, "metrics-address", "0", "serve Prometheus /metrics on this address (0: off)")
	fs.StringVar(&c.healthAddr, "health-address", "", "serve GET /healthz on this address (empty: off)")
}

func (c *clusterFlags) restConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	return cfg, nil
}

func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, v1alpha1.AddToScheme(s)
}

// newManager builds the controller-runtime manager: its cache (what opts
// select of the API, watched), its client (reads from that cache, writes to
// the API), metrics and leader election.
func newManager(cfg *rest.Config, c *clusterFlags, opts manager.Options) (manager.Manager, error) {
	ctrl.SetLogger(klog.NewKlogr()) // one log stream, klog's
	s, err := newScheme()
	if err != nil {
		return nil, err
	}
	opts.Scheme = s
	opts.Metrics = metricsserver.Options{BindAddress: c.metricsAddr}
	opts.HealthProbeBindAddress = "0" // /healthz is served by carve itself
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	return mgr, nil
}

// csiRunnable serves a CSI server for the manager's lifetime. It needs no
// leadership: every replica answers its own sidecars, which elect their
// own leader.
type csiRunnable struct {
	srv      *csi.Server
	endpoint string
}

func (r csiRunnable) Start(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- r.srv.Serve(r.endpoint) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		klog.InfoS("Stopping the CSI server")
		r.srv.Stop()
		return nil
	}
}

func (csiRunnable) NeedLeaderElection() bool { return false }

// run starts the manager until a signal, then shuts everything down.
func run(mgr manager.Manager) error {
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
