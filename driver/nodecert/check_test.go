package nodecert

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"

	"carve.dev/carve/test/testpki"
)

const requester = "system:serviceaccount:carve-system:carve-node"

// csrPEM makes a PEM certificate request of key for tmpl.
func csrPEM(t testing.TB, key crypto.Signer, tmpl *x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// agentCSR is the request the agent of node makes, as the API server
// records it from a token bound to a pod on node.
func agentCSR(t testing.TB, node string) *certv1.CertificateSigningRequest {
	return &certv1.CertificateSigningRequest{Spec: certv1.CertificateSigningRequestSpec{
		SignerName: SignerName,
		Username:   requester,
		Extra:      map[string]certv1.ExtraValue{NodeNameExtra: {node}},
		Usages:     []certv1.KeyUsage{certv1.UsageClientAuth, certv1.UsageDigitalSignature, certv1.UsageServerAuth},
		Request:    csrPEM(t, testpki.Key(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: node}, DNSNames: []string{node}}),
	}}
}

func TestCheck(t *testing.T) {
	node, req, err := Check(agentCSR(t, "node-a"), requester)
	if err != nil || node != "node-a" || req.DNSNames[0] != "node-a" {
		t.Fatalf("the agent's own request: node %q, %v", node, err)
	}
	rsaSmall, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		edit func(*certv1.CertificateSigningRequest)
		want string
	}{
		"another signer": {func(c *certv1.CertificateSigningRequest) { c.Spec.SignerName = "kubernetes.io/kube-apiserver-client" }, "signer"},
		"another requester": {func(c *certv1.CertificateSigningRequest) {
			c.Spec.Username = "system:serviceaccount:carve-system:carve-controller"
		}, "only"},
		"a token on no node":  {func(c *certv1.CertificateSigningRequest) { c.Spec.Extra = nil }, NodeNameExtra},
		"two nodes in extra":  {func(c *certv1.CertificateSigningRequest) { c.Spec.Extra[NodeNameExtra] = []string{"node-a", "node-b"} }, NodeNameExtra},
		"a bad node name":     {func(c *certv1.CertificateSigningRequest) { c.Spec.Extra[NodeNameExtra] = []string{"Node_A"} }, "node name"},
		"usages missing":      {func(c *certv1.CertificateSigningRequest) { c.Spec.Usages = c.Spec.Usages[:2] }, "usages"},
		"usages added":        {func(c *certv1.CertificateSigningRequest) { c.Spec.Usages = append(c.Spec.Usages, certv1.UsageCertSign) }, "usages"},
		"another node's name": {func(c *certv1.CertificateSigningRequest) { c.Spec.Extra[NodeNameExtra] = []string{"node-b"} }, "DNS names"},
		"not PEM":             {func(c *certv1.CertificateSigningRequest) { c.Spec.Request = []byte("node-a") }, "PEM"},
		"two PEM blocks":      {func(c *certv1.CertificateSigningRequest) { c.Spec.Request = append(c.Spec.Request, c.Spec.Request...) }, "more than one"},
		"a certificate's PEM": {func(c *certv1.CertificateSigningRequest) {
			c.Spec.Request = []byte(strings.ReplaceAll(string(c.Spec.Request), "CERTIFICATE REQUEST", "CERTIFICATE"))
		}, "PEM"},
		"a forged signature":   {func(c *certv1.CertificateSigningRequest) { c.Spec.Request = forged(t, c.Spec.Request) }, "signature"},
		"huge":                 {func(c *certv1.CertificateSigningRequest) { c.Spec.Request = make([]byte, maxRequest+1) }, "bytes"},
		"two DNS names":        {withRequest(t, testpki.Key(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "node-a"}, DNSNames: []string{"node-a", "node-b"}}), "DNS names"},
		"an IP address":        {withRequest(t, testpki.Key(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "node-a"}, DNSNames: []string{"node-a"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}), "addresses"},
		"another common name":  {withRequest(t, testpki.Key(t), &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:masters"}, DNSNames: []string{"node-a"}}), "common name"},
		"an RSA key too small": {withRequest(t, rsaSmall, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "node-a"}, DNSNames: []string{"node-a"}}), "not accepted"},
	} {
		t.Run(name, func(t *testing.T) {
			csr := agentCSR(t, "node-a")
			c.edit(csr)
			_, _, err := Check(csr, requester)
			if !errors.Is(err, errDenied) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a denial saying %q", err, c.want)
			}
		})
	}
}

func withRequest(t *testing.T, key crypto.Signer, tmpl *x509.CertificateRequest) func(*certv1.CertificateSigningRequest) {
	b := csrPEM(t, key, tmpl)
	return func(c *certv1.CertificateSigningRequest) { c.Spec.Request = b }
}

// forged is req with its subject's bytes changed after signing.
func forged(t *testing.T, req []byte) []byte {
	block, _ := pem.Decode(req)
	der := []byte(string(block.Bytes))
	i := strings.Index(string(der), "node-a")
	if i < 0 {
		t.Fatal("no node name in the request")
	}
	der[i+5] = 'z'
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestIssue(t *testing.T) {
	now := time.Now()
	certPEM, keyPEM, err := newCA(now)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := parseCA(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	_, req, err := Check(agentCSR(t, "node-a"), requester)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ca.Issue(req, "node-a", now, DefaultValidity)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(out)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "node-a", KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: now}); err != nil {
			t.Errorf("the issued certificate does not verify for node-a (usage %v): %v", usage, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "node-b", CurrentTime: now}); err == nil {
		t.Error("node-a's certificate verifies for node-b")
	}
	if got := cert.NotAfter.Sub(now); got > DefaultValidity || got < DefaultValidity-time.Minute {
		t.Errorf("valid for %v, want %v", got, DefaultValidity)
	}
	if cert.IsCA {
		t.Error("a node's certificate is a CA's")
	}
	if _, err := parseCA(out, keyPEM); err == nil {
		t.Error("a node's certificate was taken for the CA")
	}
}

// FuzzCheck: whatever a request holds, Check accepts it only for the
// requester's own node, named alone, with an accepted key.
func FuzzCheck(f *testing.F) {
	good := agentCSR(f, "node-a")
	f.Add(good.Spec.Request, "node-a", requester)
	f.Add(good.Spec.Request, "node-b", requester)
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"), "node-a", requester)
	f.Fuzz(func(t *testing.T, req []byte, node, user string) {
		csr := &certv1.CertificateSigningRequest{Spec: certv1.CertificateSigningRequestSpec{
			SignerName: SignerName, Username: user, Request: req, Usages: Usages,
			Extra: map[string]certv1.ExtraValue{NodeNameExtra: {node}},
		}}
		got, parsed, err := Check(csr, requester)
		if err != nil {
			if !errors.Is(err, errDenied) {
				t.Fatalf("an error that is not a denial: %v", err)
			}
			return
		}
		if got != node || user != requester || len(parsed.DNSNames) != 1 || parsed.DNSNames[0] != node ||
			parsed.Subject.CommonName != node || len(parsed.IPAddresses)+len(parsed.URIs)+len(parsed.EmailAddresses) != 0 {
			t.Fatalf("accepted a request for %q by %q naming %v (CN %q)", got, user, parsed.DNSNames, parsed.Subject.CommonName)
		}
	})
}

// TestValidity: a week by default, less when the request asks, never
// under ten minutes, so that a new certificate is not due for renewal
// (two thirds into a life that starts 5 minutes back) when it is signed.
func TestValidity(t *testing.T) {
	secs := func(n int32) *int32 { return &n }
	for _, c := range []struct {
		signer time.Duration
		asked  *int32
		want   time.Duration
	}{
		{0, nil, DefaultValidity},
		{0, secs(3600), time.Hour},
		{time.Hour, secs(7200), time.Hour},
		{time.Minute, nil, minValidity},
		{0, secs(1), minValidity},
	} {
		csr := &certv1.CertificateSigningRequest{Spec: certv1.CertificateSigningRequestSpec{ExpirationSeconds: c.asked}}
		got := (&Signer{Validity: c.signer}).validity(csr)
		if got != c.want {
			t.Errorf("signer %v, asked %v: %v, want %v", c.signer, c.asked, got, c.want)
		}
		now := time.Now()
		renew := now.Add(-5 * time.Minute).Add((got + 5*time.Minute) * 2 / 3)
		if !renew.After(now) {
			t.Errorf("a certificate valid %v is due for renewal when signed", got)
		}
	}
}
