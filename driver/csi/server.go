package csi

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-lib-utils/protosanitizer"
	"google.golang.org/grpc"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/crashpoint"
	"carve.dev/carve/driver/internal/keylock"
	"carve.dev/carve/driver/metrics"
	"carve.dev/carve/driver/volume"
)

// Server serves the CSI services over a unix socket.
type Server struct {
	grpc  *grpc.Server
	locks keylock.Set
}

// NewServer registers the services that are not nil, and the
// GroupController when the controller serves it (which id then
// advertises; so it does the SnapshotMetadata service). Every call goes
// through four interceptors, outermost first: logging, metrics, error
// mapping, per-volume locking (and, in the crash tests' build only, the
// crash points' tracking: driver/crashpoint). The SnapshotMetadata
// service's streams go through the first three: they change nothing, so
// they take no lock.
func NewServer(id csi.IdentityServer, ctrl csi.ControllerServer, node csi.NodeServer, meta csi.SnapshotMetadataServer) *Server {
	s := &Server{}
	chain := append([]grpc.UnaryServerInterceptor{logCalls, metrics.Interceptor, mapErrors, s.lockVolume}, crashpoint.Interceptors()...)
	s.grpc = grpc.NewServer(grpc.ChainUnaryInterceptor(chain...),
		grpc.ChainStreamInterceptor(logStreams, metrics.StreamInterceptor, mapStreamErrors))
	csi.RegisterIdentityServer(s.grpc, id)
	if meta != nil {
		csi.RegisterSnapshotMetadataServer(s.grpc, meta)
		if a, ok := id.(interface{ AdvertiseSnapshotMetadata() }); ok {
			a.AdvertiseSnapshotMetadata()
		}
	}
	if ctrl != nil {
		csi.RegisterControllerServer(s.grpc, ctrl)
	}
	if g, ok := ctrl.(groupServer); ok && g.ServesGroups() {
		csi.RegisterGroupControllerServer(s.grpc, g)
		if a, ok := id.(interface{ AdvertiseGroups() }); ok {
			a.AdvertiseGroups()
		}
	}
	if node != nil {
		csi.RegisterNodeServer(s.grpc, node)
	}
	return s
}

// groupServer is a controller that may serve group snapshots
// (Controller.ServesGroups).
type groupServer interface {
	csi.GroupControllerServer
	ServesGroups() bool
}

// Serve listens on endpoint (as SocketPath reads it) until Stop. A stale
// socket from an earlier run is removed first.
func (s *Server) Serve(endpoint string) error {
	path, err := SocketPath(endpoint)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("socket dir: %w", err)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	// Whoever may connect may create, attach and delete volumes: the
	// owner (carve, its sidecars: the same user) and its group only.
	if err := os.Chmod(path, 0o660); err != nil {
		_ = l.Close()
		return fmt.Errorf("restrict socket %s: %w", path, err)
	}
	klog.InfoS("Serving CSI", "endpoint", path)
	return s.grpc.Serve(l)
}

// Stop ends Serve after the calls in flight finish.
func (s *Server) Stop() { s.grpc.GracefulStop() }

// SocketPath is the file of a unix socket endpoint, cleaned: a URL
// "unix:///path" (or "unix:/path"), or a bare absolute path, taken as it
// is written (no URL escapes). Every endpoint flag is read by it, so the
// socket served and the one told to kubelet agree. Refused: another
// scheme (tcp://: the CSI services are served on a unix socket only), a
// relative path (it would name a file relative to carve's working
// directory, which kubelet and the sidecars do not share) or none, a
// host (unix://host/path: a unix socket has none; the host would be lost),
// a query or a fragment (they would be lost too).
func SocketPath(endpoint string) (string, error) {
	refuse := func(why string) (string, error) {
		return "", fmt.Errorf("endpoint %q: %s; want unix:///path/to/socket or /path/to/socket", endpoint, why)
	}
	path := endpoint
	if !strings.HasPrefix(endpoint, "/") {
		u, err := url.Parse(endpoint)
		switch {
		case endpoint == "":
			return refuse("empty")
		case err != nil:
			return refuse(err.Error())
		case u.Scheme == "":
			return refuse("a relative path")
		case u.Scheme != "unix":
			return refuse("not a unix socket")
		case u.Host != "" || u.User != nil:
			return refuse("a host in a unix socket's URL")
		case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
			return refuse("a query or fragment in a unix socket's URL")
		}
		path = u.Path // "" for unix:relative (u.Opaque)
	}
	if !filepath.IsAbs(path) {
		return refuse("not an absolute path")
	}
	path = filepath.Clean(path)
	if path == "/" {
		return refuse("no file")
	}
	return path, nil
}

// logCalls logs each call with secrets stripped, its duration and outcome.
func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	klog.V(3).InfoS("CSI call", "method", info.FullMethod, "request", protosanitizer.StripSecrets(req))
	resp, err := h(ctx, req)
	if err != nil {
		klog.ErrorS(err, "CSI call failed", "method", info.FullMethod, "duration", time.Since(start))
	} else {
		klog.V(3).InfoS("CSI call done", "method", info.FullMethod, "duration", time.Since(start),
			"response", protosanitizer.StripSecrets(resp))
	}
	return resp, err
}

func mapErrors(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	return resp, volume.Status(err)
}

// logStreams logs each streaming call as logCalls does a unary one; the
// request is the stream's first message, which the handler reads, so it
// is logged as the handler receives it.
func logStreams(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, &loggedStream{ServerStream: ss, method: info.FullMethod})
	if err != nil {
		klog.ErrorS(err, "CSI call failed", "method", info.FullMethod, "duration", time.Since(start))
	} else {
		klog.V(3).InfoS("CSI call done", "method", info.FullMethod, "duration", time.Since(start))
	}
	return err
}

// loggedStream logs the request its handler receives.
type loggedStream struct {
	grpc.ServerStream
	method string
}

func (l *loggedStream) RecvMsg(m any) error {
	err := l.ServerStream.RecvMsg(m)
	if err == nil {
		klog.V(3).InfoS("CSI call", "method", l.method, "request", protosanitizer.StripSecrets(m))
	}
	return err
}

// mapStreamErrors is mapErrors for streaming calls.
func mapStreamErrors(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return volume.Status(h(srv, ss))
}

// lockVolume runs at most one state-changing call per volume at a time; a
// second one is told ABORTED at once and retried by the CO later. Read-only
// calls never wait.
func (s *Server) lockVolume(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	key := lockKey(info.FullMethod, req)
	if key == "" {
		return h(ctx, req)
	}
	release, ok := s.locks.TryLock(key)
	if !ok {
		return nil, fmt.Errorf("%s on %s: %w", info.FullMethod, key, volume.ErrOperationPending)
	}
	defer release()
	return h(ctx, req)
}

// mutating lists the calls that change a volume's state.
var mutating = map[string]bool{
	csi.Controller_CreateVolume_FullMethodName:                   true,
	csi.Controller_DeleteVolume_FullMethodName:                   true,
	csi.Controller_ControllerPublishVolume_FullMethodName:        true,
	csi.Controller_ControllerUnpublishVolume_FullMethodName:      true,
	csi.Controller_ControllerExpandVolume_FullMethodName:         true,
	csi.Controller_ControllerModifyVolume_FullMethodName:         true,
	csi.Controller_CreateSnapshot_FullMethodName:                 true,
	csi.Controller_DeleteSnapshot_FullMethodName:                 true,
	csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName: true,
	csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName: true,
	csi.Node_NodeStageVolume_FullMethodName:                      true,
	csi.Node_NodeUnstageVolume_FullMethodName:                    true,
	csi.Node_NodePublishVolume_FullMethodName:                    true,
	csi.Node_NodeUnpublishVolume_FullMethodName:                  true,
	csi.Node_NodeExpandVolume_FullMethodName:                     true,
}

// lockKey is the volume or snapshot a mutating call acts on: its ID, or its
// name for CreateVolume and CreateSnapshot. Missing fields are left to the
// handler to refuse.
func lockKey(method string, req any) string {
	if !mutating[method] {
		return ""
	}
	switch r := req.(type) {
	case *csi.CreateVolumeRequest:
		return nonEmpty("name/", r.GetName())
	case *csi.CreateSnapshotRequest:
		return nonEmpty("snapshot-name/", r.GetName())
	case *csi.DeleteSnapshotRequest:
		return nonEmpty("snapshot/", r.GetSnapshotId())
	case *csi.CreateVolumeGroupSnapshotRequest:
		return nonEmpty("group-name/", r.GetName())
	case *csi.DeleteVolumeGroupSnapshotRequest:
		return nonEmpty("group/", r.GetGroupSnapshotId())
	case interface{ GetVolumeId() string }:
		return nonEmpty("volume/", r.GetVolumeId())
	}
	return ""
}

func nonEmpty(prefix, key string) string {
	if key == "" {
		return ""
	}
	return prefix + key
}
