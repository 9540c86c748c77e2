package nodecert

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// request creates a certificate request for key and waits until the
// controller signs or denies it.
func (r *Requester) request(ctx context.Context, key crypto.Signer) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: r.Node}, DNSNames: []string{r.Node}}, key)
	if err != nil {
		return nil, err
	}
	csr := &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "carve-transfer-" + r.Node + "-"},
		Spec: certv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: SignerName,
			Usages:     Usages,
		},
	}
	if err := r.Client.Create(ctx, csr); err != nil {
		return nil, fmt.Errorf("transfer certificate request: %w", err)
	}
	return r.await(ctx, csr.Name)
}

// await polls the request until it is signed, denied or failed.
func (r *Requester) await(ctx context.Context, name string) ([]byte, error) {
	wait, poll := r.Wait, r.Poll
	if wait <= 0 {
		wait = 2 * time.Minute
	}
	if poll <= 0 {
		poll = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		var csr certv1.CertificateSigningRequest
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &csr); err != nil {
			return nil, fmt.Errorf("transfer certificate request %s: %w", name, err)
		}
		if len(csr.Status.Certificate) > 0 {
			return csr.Status.Certificate, nil
		}
		for _, c := range csr.Status.Conditions {
			if (c.Type == certv1.CertificateDenied || c.Type == certv1.CertificateFailed) && c.Status == corev1.ConditionTrue {
				return nil, fmt.Errorf("transfer certificate request %s %s: %s", name, c.Type, c.Message)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("transfer certificate request %s: not signed in %v (is carve controller running?): %w", name, wait, ctx.Err())
		case <-time.After(poll):
		}
	}
}
