// Package nodecert gives each node agent the certificate that the
// node-to-node transfer (package transfer) authenticates it with, through
// Kubernetes' CertificateSigningRequest API, with the controller as the
// signer "lvm.carve.dev/transfer".
//
// # Trust
//
// A node's key is made on the node and never leaves it: the agent sends
// only a certificate request naming its node. The API server records who
// asked: a carve-node token that kubelet obtained for the agent's pod is
// bound to that pod, and the request carries the pod's node in its user
// extra (authentication.kubernetes.io/node-name, which the node admission
// policy relies on as well). The controller signs a request only when it
// comes from carve-node's ServiceAccount with such a token and names that
// node and nothing else (Check): an agent on node A cannot get a
// certificate of node B, and neither can a token bound to no pod. Any
// other request to this signer is denied with the reason.
//
// The CA's key is in a Secret of the controller's namespace, which only
// the controller reads; the controller makes it on its first start when
// the Secret is missing (an administrator may create it beforehand with
// a CA of their own). Its certificate is published in a ConfigMap that
// every agent reads to check its peers.
//
// # Lifetimes
//
// Certificates live a week (Signer.Validity, or less when the request
// asks); an agent asks for a new one once two thirds of its certificate's
// life have passed, with the same key, so that a transfer in progress is
// never left with an expired certificate.
package nodecert
