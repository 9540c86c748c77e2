//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"slices"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/nodecert"
)

// TestEveryNodeServesTransfers: installed as deploy/ has it, carve
// controller signs and every carve node gets its transfer certificate
// (a CertificateSigningRequest to lvm.carve.dev/transfer, approved and
// issued by the controller for that node's name alone) and publishes
// its pod's address, port 7443, in its NodeStorage: what another node
// dials to restore one of its snapshots.
func TestEveryNodeServesTransfers(t *testing.T) {
	t.Parallel()
	for _, node := range allNodes() {
		want := net.JoinHostPort(carvePod(t, "node", node).Status.PodIP, "7443")
		wait(t, node+"'s transfer address in its NodeStorage", 3*time.Minute, func(ctx context.Context) (bool, error) {
			var ns v1alpha1.NodeStorage
			if err := h.kc.Get(ctx, client.ObjectKey{Name: node}, &ns); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return ns.Status.TransferAddress == want, nil
		})
	}
	var csrs certv1.CertificateSigningRequestList
	if err := h.kc.List(context.Background(), &csrs); err != nil {
		t.Fatal(err)
	}
	issued := map[string]bool{}
	for _, csr := range csrs.Items {
		if csr.Spec.SignerName != nodecert.SignerName {
			continue
		}
		approved := slices.ContainsFunc(csr.Status.Conditions, func(c certv1.CertificateSigningRequestCondition) bool {
			return c.Type == certv1.CertificateApproved && c.Status == corev1.ConditionTrue
		})
		block, _ := pem.Decode(csr.Status.Certificate)
		if !approved || block == nil {
			t.Errorf("transfer certificate request %s from %s: approved %v, certificate issued %v", csr.Name, csr.Spec.Username, approved, block != nil)
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Errorf("transfer certificate of %s: %v", csr.Name, err)
			continue
		}
		if len(cert.DNSNames) != 1 {
			t.Errorf("transfer certificate of %s names %v; want one node's name", csr.Name, cert.DNSNames)
			continue
		}
		issued[cert.DNSNames[0]] = true
	}
	for _, node := range allNodes() {
		if !issued[node] {
			t.Errorf("no transfer certificate issued for node %s (issued: %v)", node, issued)
		}
	}
}
