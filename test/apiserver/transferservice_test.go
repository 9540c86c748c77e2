package apiserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/transfer"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/test/testenv"
)

// TestTransferService: carve node's transfer service on a real API server
// with the agent's token and deploy/'s RBAC. Started before the
// controller signs anything, it serves nothing and publishes no address;
// once the signer runs, it gets its certificate (trying again), listens,
// and publishes in its NodeStorage the address the Node's annotation
// gives. Node B's agent then reaches it over mutual TLS, and is refused
// what no volume of B asks for. Started again without the annotation, it
// keeps the certificate on the node and publishes its own address.
func TestTransferService(t *testing.T) {
	w := setUp(t)
	annotate(t, w, map[string]string{agent.AnnotationTransferAddress: "10.0.2.100:17443"})
	listen, keys := testenv.FreeLoopbackAddr(t), t.TempDir()
	stop := startTransferService(t, w, listen, keys)
	time.Sleep(3 * time.Second)
	if addr := transferAddress(t, w); addr != "" {
		t.Fatalf("a node without a certificate published %q", addr)
	}

	startSigner(t, w)
	awaitTransferAddress(t, w, "10.0.2.100:17443")
	agentB := as(t, token(t, w.admin, "carve-node", nodePod(t, w.admin, "carve-node-b", nodeB)))
	credsB, _, err := requester(agentB, nodeB, t).Credentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := &transfer.Client{Keyring: transfer.NewKeyring(credsB), Idle: 10 * time.Second}
	_, err = c.Receive(ctx, listen, nodeA, transfer.Request{Source: nodeA + "/vg0/snap", For: "pvc-x"},
		&bytesTarget{data: make([]byte, 1<<20)}, 1<<20, func(int64) error { return nil })
	if !errors.Is(err, transfer.ErrRefused) {
		t.Fatalf("node B asking node A's service for a snapshot no volume of B is made from: %v, want refused", err)
	}

	stop()
	annotate(t, w, nil)
	before := csrCount(t, w.admin)
	startTransferService(t, w, testenv.FreeLoopbackAddr(t), keys)
	awaitTransferAddress(t, w, "192.0.2.1:7443")
	if after := csrCount(t, w.admin); after != before {
		t.Errorf("a restarted service asked for a certificate again (%d requests, then %d)", before, after)
	}
}

// startTransferService runs node A's service as carve node does, its
// key and certificate in keys; the function it returns stops it.
func startTransferService(t *testing.T, w *world, listen, keys string) func() {
	t.Helper()
	req := requester(w.agent, nodeA, t)
	req.Dir, req.Wait = keys, 2*time.Second
	svc := &agent.TransferService{
		Node: nodeA, Credentials: req, Keyring: &transfer.Keyring{}, Listen: listen, Advertise: "192.0.2.1:7443",
		Nodes: w.agent, Storage: &agent.StorageReporter{Client: w.agent, Node: nodeA, Space: noSpace},
		Authorize: (&agent.TransferAuthorizer{Reader: w.agent, Node: nodeA}).Authorize,
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Start(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("transfer service: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func noSpace(context.Context) ([]volume.VGSpace, error) { return nil, nil }

func annotate(t *testing.T, w *world, ann map[string]string) {
	t.Helper()
	var n corev1.Node
	if err := w.admin.Get(ctx, client.ObjectKey{Name: nodeA}, &n); err != nil {
		t.Fatal(err)
	}
	n.Annotations = ann
	if err := w.admin.Update(ctx, &n); err != nil {
		t.Fatal(err)
	}
}

func transferAddress(t *testing.T, w *world) string {
	t.Helper()
	var ns v1alpha1.NodeStorage
	if err := w.admin.Get(ctx, client.ObjectKey{Name: nodeA}, &ns); err != nil {
		return ""
	}
	return ns.Status.TransferAddress
}

func awaitTransferAddress(t *testing.T, w *world, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for got := ""; got != want; got = transferAddress(t, w) {
		if time.Now().After(deadline) {
			t.Fatalf("NodeStorage %s: transfer address %q after a minute, want %q", nodeA, got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
