package nodecert

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/transfer"
)

// Requester gets and renews a node's transfer credentials: its key, kept
// in Dir, and a certificate the controller signs.
type Requester struct {
	// Client is the agent's, with the token of its pod: the request is
	// recorded as that pod's node's. Reads go to the API server, not a
	// cache.
	Client    client.Client
	Node      string
	Namespace string // where the CA's ConfigMap is
	// Dir holds the node's key (tls.key) and certificate (tls.crt),
	// readable by root only.
	Dir string
	// Wait bounds the wait for the controller to sign (default 2
	// minutes).
	Wait time.Duration
	// Poll is the interval of the wait's reads (default 1 s).
	Poll time.Duration
}

const (
	keyFile  = "tls.key"
	certFile = "tls.crt"
)

// Credentials returns the node's credentials: the certificate in Dir
// while it has more than a third of its life left and the CA still
// signs it, or a new one the controller signs for the node's key.
func (r *Requester) Credentials(ctx context.Context) (transfer.Credentials, time.Time, error) {
	pool, err := r.caPool(ctx)
	if err != nil {
		return transfer.Credentials{}, time.Time{}, err
	}
	key, keyPEM, err := r.key()
	if err != nil {
		return transfer.Credentials{}, time.Time{}, err
	}
	certPEM, err := os.ReadFile(filepath.Join(r.Dir, certFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return transfer.Credentials{}, time.Time{}, err
	}
	renew, why := r.renewAt(certPEM, pool), ""
	if certPEM == nil {
		why = "none yet"
	} else if renew.IsZero() || !time.Now().Before(renew) {
		why = "the one on the node is due for renewal, or not signed by the CA"
	}
	if why != "" {
		klog.InfoS("Asking for a transfer certificate", "node", r.Node, "why", why)
		if certPEM, err = r.request(ctx, key); err != nil {
			return transfer.Credentials{}, time.Time{}, err
		}
		if err := writeFile(filepath.Join(r.Dir, certFile), certPEM); err != nil {
			return transfer.Credentials{}, time.Time{}, err
		}
		if renew = r.renewAt(certPEM, pool); renew.IsZero() {
			return transfer.Credentials{}, time.Time{}, errors.New("the signed certificate does not verify against the CA")
		}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return transfer.Credentials{}, time.Time{}, fmt.Errorf("transfer certificate: %w", err)
	}
	klog.V(2).InfoS("Transfer credentials ready", "node", r.Node, "renewAt", renew)
	return transfer.Credentials{Certificate: pair, CA: pool}, renew, nil
}

// caPool reads the CA's certificate from its ConfigMap.
func (r *Requester) caPool(ctx context.Context) (*x509.CertPool, error) {
	var cm corev1.ConfigMap
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: CAName}, &cm); err != nil {
		return nil, fmt.Errorf("transfer CA from configmap %s/%s: %w", r.Namespace, CAName, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data[ConfigMapKey])) {
		return nil, fmt.Errorf("transfer CA: configmap %s/%s holds no certificate in %s", r.Namespace, CAName, ConfigMapKey)
	}
	return pool, nil
}

// key reads the node's key from Dir, or makes and keeps one.
func (r *Requester) key() (crypto.Signer, []byte, error) {
	path := filepath.Join(r.Dir, keyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if _, b, err = newKey(); err == nil {
			err = writeFile(path, b)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("transfer key %s: %w", path, err)
	}
	signer, err := parseKey(b)
	if err != nil {
		return nil, nil, fmt.Errorf("transfer key %s: %w", path, err)
	}
	return signer, b, nil
}

// renewAt is when the certificate in certPEM is due for renewal (two
// thirds into its life), or zero when it does not verify against pool
// for this node.
func (r *Requester) renewAt(certPEM []byte, pool *x509.CertPool) time.Time {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return time.Time{}
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}
	}
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: r.Node,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return time.Time{}
	}
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(life * 2 / 3)
}

// writeFile writes b to path (0600, root's) through a temporary file and
// a rename: a crash leaves the old file or the new one, never half of one.
func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return err
	}
	err = f.Sync()
	_ = f.Close()
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
