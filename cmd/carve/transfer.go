package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"carve.dev/carve/driver/agent"
	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/nodecert"
	"carve.dev/carve/driver/transfer"
)

// saNamespaceFile holds the namespace of the pod's ServiceAccount.
const saNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// namespaceFlag is --namespace: where Carve's own objects are (the
// transfer CA's Secret and ConfigMap); by default the pod's.
func namespaceFlag(fs *flag.FlagSet, ns *string) {
	fs.StringVar(ns, "namespace", "", "Carve's namespace, where the transfer CA's Secret and ConfigMap are (default: the pod's)")
}

// carveNamespace is ns, or the pod's namespace when empty.
func carveNamespace(ns string) (string, error) {
	if ns != "" {
		return ns, nil
	}
	b, err := os.ReadFile(saNamespaceFile)
	if err != nil {
		return "", fmt.Errorf("--namespace not given and not in a pod: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// controllerTransferFlags: the controller signs the node agents'
// transfer certificates.
type controllerTransferFlags struct {
	on        bool
	namespace string
	nodeSA    string
}

func (f *controllerTransferFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "transfer-signer", true, "sign the node agents' transfer certificates (signer "+nodecert.SignerName+
		", CA in the Secret "+nodecert.CAName+"); off: no node gets one, and no volume is copied between nodes")
	fs.StringVar(&f.nodeSA, "node-service-account", "carve-node", "the ServiceAccount of carve node, in Carve's namespace: the only requester the signer signs for")
	namespaceFlag(fs, &f.namespace)
}

// addSigner loads (or makes) the transfer CA, publishes its certificate
// and has the manager run the signer, on the leader only.
func addSigner(ctx context.Context, f controllerTransferFlags, direct client.Client, mgr manager.Manager) error {
	if !f.on {
		return nil
	}
	ns, err := carveNamespace(f.namespace)
	if err != nil {
		return err
	}
	ca, err := nodecert.LoadCA(ctx, direct, ns)
	if err != nil {
		return err
	}
	s := &nodecert.Signer{Client: mgr.GetClient(), CA: ca, Requester: "system:serviceaccount:" + ns + ":" + f.nodeSA}
	return s.SetupWithManager(mgr)
}

// nodeTransferFlags: carve node serves its snapshots to other nodes.
type nodeTransferFlags struct {
	listen    string
	advertise string
	dir       string
	namespace string
	giveUp    time.Duration
}

func (f *nodeTransferFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "transfer-address", ":7443",
		"serve this node's snapshots to other nodes' agents on this address, over mutual TLS (empty: off; no volume is copied from this node)")
	fs.StringVar(&f.advertise, "transfer-advertise-address", "",
		"the address other nodes dial (default: $POD_IP with --transfer-address's port); a node's annotation "+agent.AnnotationTransferAddress+" overrides it")
	fs.StringVar(&f.dir, "transfer-dir", "/var/lib/carve/transfer", "where the node's transfer key and certificate are kept (root only)")
	fs.DurationVar(&f.giveUp, "transfer-give-up", agent.DefaultTransferGiveUp,
		"how long a volume restored here from another node's snapshot keeps trying to reach that node before any byte is in; then RESOURCE_EXHAUSTED, and the CO places the claim again")
	namespaceFlag(fs, &f.namespace)
}

// advertised is the address to publish: --transfer-advertise-address, or
// $POD_IP at the listening port.
func (f *nodeTransferFlags) advertised() (string, error) {
	if f.advertise != "" {
		return f.advertise, nil
	}
	_, port, err := net.SplitHostPort(f.listen)
	if err != nil {
		return "", fmt.Errorf("--transfer-address %q: %w", f.listen, err)
	}
	ip := os.Getenv("POD_IP")
	if net.ParseIP(ip) == nil {
		return "", errors.New("--transfer-advertise-address not given and $POD_IP is not an IP address")
	}
	return net.JoinHostPort(ip, port), nil
}

// nodeTransfers are carve node's transfers, made before the volume
// Manager (which receives through them) and added to the agent's manager
// after it (they serve through the Manager).
type nodeTransfers struct {
	flags     nodeTransferFlags
	namespace string
	advertise string
	node      string
	ring      *transfer.Keyring
	// direct reads and writes the API server without the agent's cache,
	// which holds neither CSRs, the CA's ConfigMap nor other nodes'
	// NodeStorage.
	direct   client.Client
	receiver *agent.TransferReceiver
}

// newNodeTransfers: nil when --transfer-address is empty (no transfers,
// either way).
func newNodeTransfers(cfg *rest.Config, f nodeTransferFlags, node string) (*nodeTransfers, error) {
	if f.listen == "" {
		return nil, nil
	}
	ns, err := carveNamespace(f.namespace)
	if err != nil {
		return nil, err
	}
	advertise, err := f.advertised()
	if err != nil {
		return nil, err
	}
	s, err := newScheme()
	if err != nil {
		return nil, err
	}
	direct, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	ring := &transfer.Keyring{}
	return &nodeTransfers{flags: f, namespace: ns, advertise: advertise, node: node, ring: ring, direct: direct,
		receiver: &agent.TransferReceiver{Client: &transfer.Client{Keyring: ring}, Reader: direct, GiveUp: f.giveUp}}, nil
}

// remote is what the volume Manager receives through (nil: nothing).
func (t *nodeTransfers) remote() lvmvol.Remote {
	if t == nil {
		return nil
	}
	return t.receiver
}

// add has the manager keep the node's credentials and serve its
// snapshots to the nodes the controller placed their restores on.
func (t *nodeTransfers) add(mgr manager.Manager, vols *lvmvol.Manager, storage *agent.StorageReporter) error {
	if t == nil {
		return nil
	}
	authz := &agent.TransferAuthorizer{Reader: t.direct, Node: t.node, Sources: vols}
	return mgr.Add(&agent.TransferService{
		Node: t.node, Keyring: t.ring, Listen: t.flags.listen, Advertise: t.advertise,
		Credentials: &nodecert.Requester{Client: t.direct, Node: t.node, Namespace: t.namespace, Dir: t.flags.dir},
		Nodes:       t.direct, Authorize: authz.Authorize, Storage: storage,
	})
}
