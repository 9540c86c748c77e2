// Package registration registers the node plugin with kubelet by itself,
// the job node-driver-registrar does elsewhere (that sidecar is not
// available to this project): kubelet watches its plugins_registry
// directory, calls GetInfo on each socket that appears there, and then
// talks CSI to the endpoint it learns.
package registration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// server answers kubelet's plugin watcher.
type server struct {
	registerapi.UnimplementedRegistrationServer
	driver, endpoint string
}

// GetInfo tells kubelet the driver's name and its CSI socket.
func (s *server) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.driver,
		Endpoint:          s.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

// NotifyRegistrationStatus is kubelet's answer; a refusal is logged, since
// the node plugin cannot serve pods until kubelet accepts it.
func (s *server) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.GetPluginRegistered() {
		klog.InfoS("Registered with kubelet", "driver", s.driver)
	} else {
		klog.ErrorS(nil, "kubelet refused the plugin registration", "driver", s.driver, "error", st.GetError())
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Server serves the registration socket.
type Server struct {
	grpc *grpc.Server
	path string
}

// New prepares registration of driver, whose CSI socket is csiEndpoint (a
// path on the host, as kubelet sees it), on socket path regSocket (in
// kubelet's plugins_registry directory).
func New(driver, csiEndpoint, regSocket string) *Server {
	g := grpc.NewServer()
	registerapi.RegisterRegistrationServer(g, &server{driver: driver, endpoint: csiEndpoint})
	return &Server{grpc: g, path: regSocket}
}

// Serve listens until Stop, replacing a stale socket from an earlier run.
func (s *Server) Serve() error {
	if err := os.MkdirAll(filepath.Dir(s.path), 0o750); err != nil {
		return fmt.Errorf("registration socket dir: %w", err)
	}
	if err := os.Remove(s.path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove stale registration socket: %w", err)
	}
	l, err := net.Listen("unix", s.path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.path, err)
	}
	// kubelet (root) is the only client: not world-writable.
	if err := os.Chmod(s.path, 0o660); err != nil {
		_ = l.Close()
		return fmt.Errorf("restrict socket %s: %w", s.path, err)
	}
	klog.InfoS("Serving kubelet plugin registration", "socket", s.path)
	return s.grpc.Serve(l)
}

// Stop ends Serve and removes the socket, so kubelet unregisters the
// plugin.
func (s *Server) Stop() {
	s.grpc.Stop()
	_ = os.Remove(s.path)
}
