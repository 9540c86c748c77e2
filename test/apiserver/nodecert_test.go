package apiserver_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"carve.dev/carve/driver/nodecert"
	"carve.dev/carve/driver/transfer"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/test/apiserver"
)

const nodeRequester = "system:serviceaccount:" + ns + ":carve-node"

// startSigner runs the controller's side as carve controller would:
// the CA loaded (made, the first time) with the controller's token, and
// the signer in a manager of that token, until the test ends.
func startSigner(t *testing.T, w *world) *nodecert.CA {
	t.Helper()
	ca, err := nodecert.LoadCA(ctx, w.controller, ns)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(server.Config)
	cfg.BearerToken = token(t, w.admin, "carve-controller", nil)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme(t),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	s := &nodecert.Signer{Client: mgr.GetClient(), CA: ca, Requester: nodeRequester}
	if err := s.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	apiserver.RunManager(t, mgr)
	return ca
}

func requester(c client.Client, node string, t *testing.T) *nodecert.Requester {
	return &nodecert.Requester{Client: c, Node: node, Namespace: ns, Dir: t.TempDir(),
		Wait: 30 * time.Second, Poll: 100 * time.Millisecond}
}

// TestTransferCertificates: each node agent gets its transfer certificate
// through the CertificateSigningRequest API on a real API server, with the
// token of its pod and deploy/'s RBAC as written, the controller signing
// as lvm.carve.dev/transfer; the two nodes' certificates then carry a
// transfer between them. A request for another node's name, or from a
// token bound to no pod, is denied with the reason; an agent cannot read
// the CA's key.
func TestTransferCertificates(t *testing.T) {
	w := setUp(t)
	ca := startSigner(t, w)
	agentB := as(t, token(t, w.admin, "carve-node", nodePod(t, w.admin, "carve-node-b", nodeB)))

	reqA := requester(w.agent, nodeA, t)
	credsA, renewA, err := reqA.Credentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkNodeCert(t, credsA, ca, nodeA)
	if until := time.Until(renewA); until < 4*24*time.Hour || until > 5*24*time.Hour {
		t.Errorf("renewal in %v, want two thirds into a week", until)
	}
	// A second start finds the certificate on the node: no new request.
	before := csrCount(t, w.admin)
	if _, _, err := reqA.Credentials(ctx); err != nil {
		t.Fatal(err)
	}
	if after := csrCount(t, w.admin); after != before {
		t.Errorf("an agent with a valid certificate asked again (%d requests, then %d)", before, after)
	}
	credsB, _, err := requester(agentB, nodeB, t).Credentials(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkNodeCert(t, credsB, ca, nodeB)
	transferBetween(t, credsA, credsB)

	t.Run("another node's name", func(t *testing.T) {
		_, _, err := requester(w.agent, nodeB, t).Credentials(ctx)
		if err == nil || !strings.Contains(err.Error(), "Denied") || !strings.Contains(err.Error(), "DNS names") {
			t.Fatalf("node A's agent asking for node B's certificate: %v, want a denial saying why", err)
		}
	})
	t.Run("a token bound to no pod", func(t *testing.T) {
		_, _, err := requester(w.unbound, nodeA, t).Credentials(ctx)
		if err == nil || !strings.Contains(err.Error(), nodecert.NodeNameExtra) {
			t.Fatalf("a token bound to no pod: %v, want a denial naming %s", err, nodecert.NodeNameExtra)
		}
	})
	t.Run("the CA's key", func(t *testing.T) {
		err := w.agent.Get(ctx, client.ObjectKey{Namespace: ns, Name: nodecert.CAName}, &corev1.Secret{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("an agent reading the CA's Secret: %v, want forbidden", err)
		}
	})
}

// checkNodeCert: the certificate names node alone and verifies against
// the CA for both ends of a transfer.
func checkNodeCert(t *testing.T, c transfer.Credentials, ca *nodecert.CA, node string) {
	t.Helper()
	cert, err := x509.ParseCertificate(c.Certificate.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(cert.DNSNames) != 1 || cert.DNSNames[0] != node {
		t.Errorf("%s's certificate names %v", node, cert.DNSNames)
	}
	block, _ := pem.Decode(ca.PEM)
	root, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.CheckSignatureFrom(root); err != nil {
		t.Errorf("%s's certificate is not the CA's: %v", node, err)
	}
}

// transferBetween serves 3 MiB from node A to node B with the credentials
// the API gave them.
func transferBetween(t *testing.T, a, b transfer.Credentials) {
	t.Helper()
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	src := &bytesSource{data: data}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = transfer.NewServer(transfer.ServerConfig{Keyring: transfer.NewKeyring(a),
			Authorize: func(_ context.Context, peer string, _ transfer.Request) (transfer.Source, error) {
				if peer != nodeB {
					return nil, transfer.ErrRefused
				}
				return src, nil
			}}).Serve(sctx, l)
	}()
	dst := &bytesTarget{data: make([]byte, len(data))}
	c := &transfer.Client{Keyring: transfer.NewKeyring(b)}
	if _, err := c.Receive(ctx, l.Addr().String(), nodeA, transfer.Request{Source: nodeA + "/vg0/snap", For: "pvc-restored"}, dst, int64(len(data)),
		func(int64) error { return nil }); err != nil {
		t.Fatalf("a transfer between the two nodes' certificates: %v", err)
	}
	if string(dst.data) != string(data) {
		t.Fatal("the transfer's target differs from its source")
	}
}

func csrCount(t *testing.T, c client.Client) int {
	t.Helper()
	var l certv1.CertificateSigningRequestList
	if err := c.List(ctx, &l); err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

type bytesSource struct{ data []byte }

func (s *bytesSource) ReadAt(b []byte, off int64) (int, error) { return copy(b, s.data[off:]), nil }
func (s *bytesSource) Size() int64                             { return int64(len(s.data)) }
func (s *bytesSource) Close() error                            { return nil }
func (s *bytesSource) Allocated(_ context.Context, from int64, each func(volume.Range) error) error {
	return each(volume.Range{Offset: 0, Length: int64(len(s.data))})
}

type bytesTarget struct{ data []byte }

func (d *bytesTarget) WriteAt(b []byte, off int64) (int, error) { return copy(d.data[off:], b), nil }
func (d *bytesTarget) ReadAt(b []byte, off int64) (int, error)  { return copy(b, d.data[off:]), nil }
func (d *bytesTarget) Zero(off, n int64) error {
	clear(d.data[off : off+n])
	return nil
}
func (d *bytesTarget) Sync() error { return nil }
