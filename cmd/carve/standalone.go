package main

import (
	"flag"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/csi"
)

// runStandalone wires the CSI services straight onto this node's LVM and
// serves them until SIGINT or SIGTERM.
func runStandalone(args []string) error {
	var f localFlags
	var healthAddr string
	fs := flag.NewFlagSet("standalone", flag.ContinueOnError)
	f.register(fs, "unix:///run/carve/csi.sock")
	fs.StringVar(&healthAddr, "health-address", "", "serve GET /healthz and Prometheus /metrics on this address, e.g. 127.0.0.1:9808 (empty: off)")
	logging := loggingFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyLogging(fs, logging, nil); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	st := f.build(false, nil)
	defer st.closeLVM()
	vols, node := st.vols, st.node
	srv := csi.NewServer(csi.NewIdentity(version, true, vols), csi.NewController(vols), node, csi.NewSnapshotMetadata(vols))
	health := serveHealth(healthAddr, vgCheck(vols), true)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-stop
		klog.InfoS("Stopping on signal", "signal", s)
		closeServer(health)
		srv.Stop()
	}()
	klog.InfoS("Carve standalone starting", "version", version, "node", f.nodeID, "volumeGroups", f.vgs)
	return srv.Serve(f.endpoint)
}
