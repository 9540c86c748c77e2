package agent

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/transfer"
	"carve.dev/carve/driver/volume"
)

// AnnotationTransferAddress on a Node overrides the address other nodes'
// agents dial for its transfer server (host:port): for networks where the
// carve node pod's own address does not route between nodes (a NAT, a
// port forwarded by the host).
const AnnotationTransferAddress = "lvm.carve.dev/transfer-address"

// Credentials keeps the node's transfer credentials in a Keyring
// (nodecert.Requester.Keep): it returns when ctx ends, and calls ready
// once when the Keyring first holds credentials.
type Credentials interface {
	Keep(ctx context.Context, ring *transfer.Keyring, ready func())
}

// TransferService serves this node's snapshots to the agents of other
// nodes: it keeps the node's credentials, listens once it has them, and
// then publishes where it listens in the node's NodeStorage
// (status.transferAddress), which tells the other nodes that it serves.
// Until then that address is empty, and a copy from this node waits.
type TransferService struct {
	Node        string
	Credentials Credentials
	// Keyring receives the credentials; the receiving side (transfer.Client)
	// shares it.
	Keyring *transfer.Keyring
	// Listen is the address the server listens on (":7443").
	Listen string
	// Advertise is the address other nodes dial, unless the Node's
	// AnnotationTransferAddress says otherwise.
	Advertise string
	// Nodes reads the Node's annotation (from the API server: the agent's
	// cache holds no Nodes).
	Nodes     client.Reader
	Authorize transfer.Authorizer
	Storage   *StorageReporter
}

// Start implements manager.Runnable: it returns when ctx ends, or when
// the server cannot listen.
func (s *TransferService) Start(ctx context.Context) error {
	ready := make(chan struct{})
	go s.Credentials.Keep(ctx, s.Keyring, func() { close(ready) })
	select {
	case <-ctx.Done():
		return nil
	case <-ready:
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.Listen)
	if err != nil {
		return fmt.Errorf("transfer server: %w", err)
	}
	go s.publish(ctx)
	klog.InfoS("Serving transfers", "node", s.Node, "address", l.Addr().String())
	srv := transfer.NewServer(transfer.ServerConfig{Keyring: s.Keyring, Authorize: s.Authorize})
	return srv.Serve(ctx, l)
}

// NeedLeaderElection: every node agent serves its own node.
func (*TransferService) NeedLeaderElection() bool { return false }

// publish writes the address to dial into the NodeStorage, trying again
// every 10 s until it is written or ctx ends.
func (s *TransferService) publish(ctx context.Context) {
	for {
		addr, err := s.address(ctx)
		if err == nil {
			err = s.Storage.SetTransferAddress(ctx, addr)
		}
		if err == nil {
			klog.InfoS("Transfer address published", "node", s.Node, "address", addr)
			return
		}
		klog.ErrorS(err, "Publishing the transfer address: will try again", "node", s.Node)
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
}

// address is the Node's annotation when it has one, else Advertise.
func (s *TransferService) address(ctx context.Context) (string, error) {
	var n corev1.Node
	if err := s.Nodes.Get(ctx, client.ObjectKey{Name: s.Node}, &n); err != nil {
		return "", fmt.Errorf("reading node %s: %w", s.Node, err)
	}
	addr, why := s.Advertise, "the pod's address"
	if a, ok := n.Annotations[AnnotationTransferAddress]; ok {
		addr, why = a, "node annotation "+AnnotationTransferAddress
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("%w: transfer address %q (%s): %w", volume.ErrInvalidArgument, addr, why, err)
	}
	return addr, nil
}

// SetTransferAddress writes the node's transfer address into its
// NodeStorage, the rest of its status as the last report left it.
func (s *StorageReporter) SetTransferAddress(ctx context.Context, addr string) error {
	return s.withSpace(ctx, func(space []volume.VGSpace) error {
		_, _, err := s.rewrite(ctx, space, func(next *v1alpha1.NodeStorageStatus) { next.TransferAddress = addr })
		return err
	})
}
