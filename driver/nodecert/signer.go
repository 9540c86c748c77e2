package nodecert

import (
	"context"
	"fmt"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultValidity is how long a node's certificate lives.
const DefaultValidity = 7 * 24 * time.Hour

// Signer approves and signs the agents' requests to SignerName, and
// denies every other request to it (Check says why).
type Signer struct {
	Client client.Client
	CA     *CA
	// Requester is the user name of carve-node's ServiceAccount,
	// system:serviceaccount:NAMESPACE:carve-node.
	Requester string
	// Validity of a certificate (DefaultValidity when 0); a request asking
	// for less (spec.expirationSeconds) gets less.
	Validity time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// SetupWithManager has the manager's controller call the signer for
// every request to SignerName. It runs on the leader only: two replicas
// would sign each request twice.
func (s *Signer) SetupWithManager(mgr ctrl.Manager) error {
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		csr, ok := o.(*certv1.CertificateSigningRequest)
		return ok && csr.Spec.SignerName == SignerName
	})
	return ctrl.NewControllerManagedBy(mgr).Named("transfer-certificates").
		For(&certv1.CertificateSigningRequest{}, builder.WithPredicates(ours)).
		Complete(s)
}

// Reconcile implements reconcile.Reconciler.
func (s *Signer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var csr certv1.CertificateSigningRequest
	if err := s.Client.Get(ctx, req.NamespacedName, &csr); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, s.Sign(ctx, &csr)
}

// Sign decides csr: a request already decided or signed is left alone;
// one Check refuses is denied with its reason; any other is approved and
// signed. Each step is one update of its own: a crash between approving
// and signing leaves an approved request, which the next call signs.
func (s *Signer) Sign(ctx context.Context, csr *certv1.CertificateSigningRequest) error {
	if csr.Spec.SignerName != SignerName || len(csr.Status.Certificate) > 0 ||
		hasCondition(csr, certv1.CertificateDenied) || hasCondition(csr, certv1.CertificateFailed) {
		return nil
	}
	node, req, err := Check(csr, s.Requester)
	if err != nil {
		klog.InfoS("Denied a transfer certificate request", "csr", csr.Name, "user", csr.Spec.Username, "reason", err)
		return s.decide(ctx, csr, certv1.CertificateDenied, "CarveRefused", err.Error())
	}
	if !hasCondition(csr, certv1.CertificateApproved) {
		msg := fmt.Sprintf("carve-node's request for node %s's transfer certificate, from a token bound to a pod on %s", node, node)
		if err := s.decide(ctx, csr, certv1.CertificateApproved, "CarveNodeAgent", msg); err != nil {
			return err
		}
	}
	now := s.now()
	cert, err := s.CA.Issue(req, node, now, s.validity(csr))
	if err != nil {
		return err
	}
	csr.Status.Certificate = cert
	if err := s.Client.Status().Update(ctx, csr); err != nil {
		return fmt.Errorf("certificate request %s: %w", csr.Name, err)
	}
	klog.InfoS("Signed a transfer certificate", "csr", csr.Name, "node", node, "validity", s.validity(csr))
	return nil
}

// decide adds an Approved or Denied condition through the approval
// subresource.
func (s *Signer) decide(ctx context.Context, csr *certv1.CertificateSigningRequest, t certv1.RequestConditionType, reason, msg string) error {
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastUpdateTime: metav1.Now(),
	})
	err := s.Client.SubResource("approval").Update(ctx, csr)
	if apierrors.IsConflict(err) {
		return fmt.Errorf("certificate request %s changed meanwhile, read again: %w", csr.Name, err)
	}
	if err != nil {
		return fmt.Errorf("certificate request %s: %s: %w", csr.Name, t, err)
	}
	return nil
}

// minValidity is the shortest life a certificate gets: the API's least
// expirationSeconds. Issue backdates a certificate by 5 minutes, and an
// agent renews two thirds into its life; a shorter life would make a new
// certificate due for renewal as soon as it is signed.
const minValidity = 10 * time.Minute

func (s *Signer) validity(csr *certv1.CertificateSigningRequest) time.Duration {
	v := s.Validity
	if v <= 0 {
		v = DefaultValidity
	}
	if e := csr.Spec.ExpirationSeconds; e != nil && *e > 0 {
		v = min(v, time.Duration(*e)*time.Second)
	}
	return max(v, minValidity)
}

func (s *Signer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func hasCondition(csr *certv1.CertificateSigningRequest, t certv1.RequestConditionType) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
