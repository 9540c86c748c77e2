package nodecert

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"

	certv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// SignerName is the signer of node agents' transfer certificates.
const SignerName = "lvm.carve.dev/transfer"

// NodeNameExtra is the user extra in which the API server names the node
// of the pod a token is bound to.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// Usages are what a node's certificate is for: it serves transfers and
// asks for them.
var Usages = []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageServerAuth, certv1.UsageClientAuth}

// errDenied marks a request Check refuses.
var errDenied = errors.New("certificate request denied")

// Check tells whether csr is one the signer signs: from requester (the
// carve-node ServiceAccount's user name) with a token bound to a pod on a
// node, asking for a certificate of that node alone, for Usages, with a
// key of a kind and size worth trusting. It returns the node, and the
// parsed request.
func Check(csr *certv1.CertificateSigningRequest, requester string) (string, *x509.CertificateRequest, error) {
	spec := csr.Spec
	if spec.SignerName != SignerName {
		return "", nil, fmt.Errorf("%w: signer %q is not %s", errDenied, spec.SignerName, SignerName)
	}
	if spec.Username != requester {
		return "", nil, fmt.Errorf("%w: asked by %q, only %s may ask", errDenied, spec.Username, requester)
	}
	node, err := tokenNode(spec.Extra)
	if err != nil {
		return "", nil, err
	}
	if !sameUsages(spec.Usages) {
		return "", nil, fmt.Errorf("%w: usages %v, want exactly %v", errDenied, spec.Usages, Usages)
	}
	req, err := parseRequest(spec.Request)
	if err != nil {
		return "", nil, err
	}
	if err := checkNames(req, node); err != nil {
		return "", nil, err
	}
	if err := checkKey(req.PublicKey); err != nil {
		return "", nil, err
	}
	return node, req, nil
}

// tokenNode is the node the requester's token is bound to.
func tokenNode(extra map[string]certv1.ExtraValue) (string, error) {
	v := extra[NodeNameExtra]
	if len(v) != 1 || v[0] == "" {
		return "", fmt.Errorf("%w: the requester's token is bound to no pod on a node (no %s)", errDenied, NodeNameExtra)
	}
	if errs := validation.IsDNS1123Subdomain(v[0]); len(errs) > 0 {
		return "", fmt.Errorf("%w: node name %q: %v", errDenied, v[0], errs)
	}
	return v[0], nil
}

func sameUsages(got []certv1.KeyUsage) bool {
	if len(got) != len(Usages) {
		return false
	}
	for _, u := range Usages {
		if !slices.Contains(got, u) {
			return false
		}
	}
	return true
}

// maxRequest bounds the PEM a request may hold: a certificate request is
// well under 4 KiB even with an RSA 4096 key.
const maxRequest = 16 << 10

// parseRequest reads the one PEM certificate request of b and checks its
// signature (the requester holds the key).
func parseRequest(b []byte) (*x509.CertificateRequest, error) {
	if len(b) > maxRequest {
		return nil, fmt.Errorf("%w: a request of %d bytes", errDenied, len(b))
	}
	block, rest := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("%w: no PEM CERTIFICATE REQUEST", errDenied)
	}
	if p, _ := pem.Decode(rest); p != nil {
		return nil, fmt.Errorf("%w: more than one PEM block", errDenied)
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDenied, err)
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: signature: %w", errDenied, err)
	}
	return req, nil
}

// checkNames: the request names its node as its one DNS name and its
// common name, and nothing else (no address, URI or e-mail a peer could
// be taken for).
func checkNames(req *x509.CertificateRequest, node string) error {
	if len(req.DNSNames) != 1 || req.DNSNames[0] != node {
		return fmt.Errorf("%w: DNS names %v, want only the requester's node %q", errDenied, req.DNSNames, node)
	}
	if req.Subject.CommonName != node {
		return fmt.Errorf("%w: common name %q, want the node %q", errDenied, req.Subject.CommonName, node)
	}
	if len(req.IPAddresses)+len(req.URIs)+len(req.EmailAddresses) > 0 {
		return fmt.Errorf("%w: the request names addresses, URIs or e-mail addresses; only the node's name is signed", errDenied)
	}
	return nil
}

// checkKey accepts ECDSA on P-256 or P-384, Ed25519, and RSA of 2048 to
// 8192 bits.
func checkKey(pub any) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() || k.Curve == elliptic.P384() {
			return nil
		}
	case ed25519.PublicKey:
		return nil
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n >= 2048 && n <= 8192 {
			return nil
		}
	}
	return fmt.Errorf("%w: a %T key of a kind or size not accepted (ECDSA P-256 or P-384, Ed25519, RSA 2048 to 8192 bits)", errDenied, pub)
}
