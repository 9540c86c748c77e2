package transfer

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"carve.dev/carve/driver/volume"
)

// alpn names the protocol in the TLS handshake: a peer speaking another
// protocol (or another version of this one) fails the handshake.
const alpn = "carve-transfer/1"

// Credentials are a node's: its certificate (whose one DNS name is the
// node's name, usable for server and client authentication) with its key,
// and the CA that signs every node's certificate.
type Credentials struct {
	Certificate tls.Certificate
	CA          *x509.CertPool
}

// Keyring holds a node's current credentials. A renewal replaces them
// while transfers run: each connection takes the credentials that are
// current when it starts, and those running keep theirs.
type Keyring struct{ p atomic.Pointer[Credentials] }

// NewKeyring holds c.
func NewKeyring(c Credentials) *Keyring {
	k := &Keyring{}
	k.Set(c)
	return k
}

// Set replaces the credentials.
func (k *Keyring) Set(c Credentials) { k.p.Store(&c) }

// Get returns the current credentials; none (a connection then fails its
// handshake) while a Keyring made without NewKeyring has had no Set.
func (k *Keyring) Get() Credentials {
	if c := k.p.Load(); c != nil {
		return *c
	}
	return Credentials{}
}

// LoadCredentials reads a node's credentials from PEM files.
func LoadCredentials(certFile, keyFile, caFile string) (Credentials, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return Credentials{}, fmt.Errorf("transfer credentials: %w", err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return Credentials{}, fmt.Errorf("transfer credentials: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return Credentials{}, fmt.Errorf("transfer credentials: %s holds no PEM certificate", caFile)
	}
	return Credentials{Certificate: cert, CA: pool}, nil
}

// errNoCredentials: the Keyring holds none yet. Without a CA, crypto/tls
// would check a peer against the system's roots, which sign no node.
var errNoCredentials = fmt.Errorf("%w: this node has no transfer credentials yet", volume.ErrOperationPending)

// ready fails while c holds no certificate or CA.
func (c Credentials) ready() error {
	if c.CA == nil || c.Certificate.PrivateKey == nil {
		return errNoCredentials
	}
	return nil
}

// serverConfig: TLS 1.3 only, and a client certificate signed by the CA
// is required (crypto/tls then also checks it is for client
// authentication).
func (c Credentials) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.Certificate},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.CA,
		NextProtos:   []string{alpn},
	}
}

// clientConfig for a connection to node's server: its certificate must be
// signed by the CA and name node.
func (c Credentials) clientConfig(node string) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.Certificate},
		RootCAs:      c.CA,
		ServerName:   node,
		NextProtos:   []string{alpn},
	}
}

// peerNode is the node a verified peer certificate names: its one DNS
// name. A certificate naming none or several is refused: which node it
// stands for would be a guess.
func peerNode(state tls.ConnectionState) (string, error) {
	if len(state.VerifiedChains) == 0 || len(state.PeerCertificates) == 0 {
		return "", errors.New("no verified peer certificate")
	}
	names := state.PeerCertificates[0].DNSNames
	if len(names) != 1 {
		return "", fmt.Errorf("the peer's certificate names %d DNS names (%v), want its node's name alone", len(names), names)
	}
	return names[0], nil
}
