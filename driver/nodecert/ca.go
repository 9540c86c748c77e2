package nodecert

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CAName names both the Secret holding the CA's key and certificate
// (controller only) and the ConfigMap publishing its certificate
// (ConfigMapKey) to the agents.
const CAName = "carve-transfer-ca"

// ConfigMapKey is the CA certificate's key in the ConfigMap.
const ConfigMapKey = "ca.crt"

// caValidity: the CA made on a first start lives ten years; the nodes'
// certificates it signs, a week.
const caValidity = 10 * 365 * 24 * time.Hour

// CA signs nodes' certificates.
type CA struct {
	cert *x509.Certificate
	key  crypto.Signer
	// PEM is the CA's certificate.
	PEM []byte
}

// parseCA reads a CA from its certificate and key in PEM.
func parseCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("the certificate of %q is not a CA's", cert.Subject.CommonName)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T key cannot sign", pair.PrivateKey)
	}
	return &CA{cert: cert, key: key, PEM: certPEM}, nil
}

// newCA makes a self-signed CA with an ECDSA P-256 key.
func newCA(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "carve transfer CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// serial is a random 127-bit serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // crypto/rand does not fail on Linux
	}
	return n
}

// Issue signs a certificate of node for req's key, valid from now for
// validity.
func (ca *CA) Issue(req *x509.CertificateRequest, node string, now time.Time, validity time.Duration) ([]byte, error) {
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: node},
		DNSNames:     []string{node},
		NotBefore:    now.Add(-5 * time.Minute), // nodes' clocks differ a little
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, req.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate of %s: %w", node, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// LoadCA reads the CA from its Secret in namespace, making it first when
// there is none, and publishes its certificate in the ConfigMap. Two
// controllers starting at once both try to create the Secret: the one
// that loses reads the winner's.
func LoadCA(ctx context.Context, c client.Client, namespace string) (*CA, error) {
	ca, err := loadOrCreateSecret(ctx, c, namespace)
	if err != nil {
		return nil, fmt.Errorf("transfer CA: %w", err)
	}
	if err := publish(ctx, c, namespace, ca.PEM); err != nil {
		return nil, fmt.Errorf("transfer CA: publishing its certificate: %w", err)
	}
	return ca, nil
}

func loadOrCreateSecret(ctx context.Context, c client.Client, namespace string) (*CA, error) {
	key := client.ObjectKey{Namespace: namespace, Name: CAName}
	var s corev1.Secret
	err := c.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		certPEM, keyPEM, gerr := newCA(time.Now())
		if gerr != nil {
			return nil, gerr
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: CAName},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}
		err = c.Create(ctx, &s)
		if err == nil {
			klog.InfoS("Made the CA of node-to-node transfers", "secret", key)
		} else if apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, key, &s)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", key, err)
	}
	ca, err := parseCA(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", key, err)
	}
	return ca, nil
}

// publish writes the CA's certificate into the ConfigMap the agents read.
func publish(ctx context.Context, c client.Client, namespace string, certPEM []byte) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: CAName},
		Data: map[string]string{ConfigMapKey: string(certPEM)}}
	err := c.Create(ctx, cm)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	var old corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), &old); err != nil {
		return err
	}
	if old.Data[ConfigMapKey] == string(certPEM) {
		return nil
	}
	old.Data = cm.Data
	return c.Update(ctx, &old)
}
