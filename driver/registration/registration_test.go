package registration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// TestKubeletHandshake plays kubelet's side: GetInfo on the socket, then
// the registration verdict; Stop removes the socket.
func TestKubeletHandshake(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "lvm.carve.dev-reg.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil { // a stale leftover
		t.Fatal(err)
	}
	s := New("lvm.carve.dev", "/var/lib/kubelet/plugins/lvm.carve.dev/csi.sock", sock)
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(true)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	c := registerapi.NewRegistrationClient(conn)
	info, err := c.GetInfo(context.Background(), &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm()&0o007 != 0 {
		t.Errorf("registration socket %v, %v: want no access for others", fi.Mode(), err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != "lvm.carve.dev" ||
		info.GetEndpoint() != "/var/lib/kubelet/plugins/lvm.carve.dev/csi.sock" || len(info.GetSupportedVersions()) == 0 {
		t.Errorf("GetInfo = %v", info)
	}
	for _, ok := range []bool{true, false} {
		if _, err := c.NotifyRegistrationStatus(context.Background(), &registerapi.RegistrationStatus{PluginRegistered: ok}); err != nil {
			t.Errorf("NotifyRegistrationStatus(%v): %v", ok, err)
		}
	}
	s.Stop()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left after Stop: %v", err)
	}
}
