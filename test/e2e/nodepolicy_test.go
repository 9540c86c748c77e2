//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// TestNodeCannotChangeAnotherNode: deploy/'s node policy
// (ValidatingAdmissionPolicy carve-node-own-node; the chart's, as this runs
// after TestHelmTakesOver) on the real cluster. Every other node's carve
// node pod (the host node's, and the other VM node's, which has LVM and
// resources of its own) stands for a compromised node: a token of
// carve-node bound to that pod (TokenRequest, as kubelet's projected token
// is) tries to update a LogicalVolume that lives on the volume's node, its
// status and that node's NodeStorage, and is refused with the policy's
// message. The same requests with a token bound to the owner's own pod are
// allowed; they are server dry runs (admission runs, nothing is written),
// so the owner keeps its resources to itself. That the agents' real writes
// pass the policy, every other scenario shows.
func TestNodeCannotChangeAnotherNode(t *testing.T) {
	t.Parallel()
	create(t, pvc("fence", "carve-thick", "64Mi"))
	p := runPod(t, "fence-1", "fence")
	// Its LogicalVolume has the PV's name (volume.LVName keeps pvc-<UID>
	// names), on the pod's node.
	owner := p.Spec.NodeName
	pvName := boundClaim(t, "fence").Spec.VolumeName
	var res v1alpha1.LogicalVolume
	if err := h.kc.Get(context.Background(), client.ObjectKey{Name: pvName}, &res); err != nil || res.Spec.NodeName != owner {
		t.Fatalf("LogicalVolume %s: node %q, %v; want one on %s", pvName, res.Spec.NodeName, err, owner)
	}

	own := nodeAgentClient(t, carvePod(t, "node", owner))
	lv := func() client.Object { return &v1alpha1.LogicalVolume{} }
	ns := func() client.Object { return &v1alpha1.NodeStorage{} }
	probes := []struct {
		what, name string // what the policy's message calls it; its name
		obj        func() client.Object
		status     bool
	}{
		{"LogicalVolume " + pvName, pvName, lv, false},
		{"LogicalVolume " + pvName + " status", pvName, lv, true},
		{"NodeStorage " + owner + " status", owner, ns, true},
	}
	// Every other node's agent is refused: the host node's, and the other
	// VM node's, an LVM node with resources of its own.
	for _, other := range allNodes() {
		if other == owner {
			continue
		}
		agent := nodeAgentClient(t, carvePod(t, "node", other))
		for _, p := range probes {
			err := probeUpdate(agent, p.obj(), p.name, p.status, false)
			switch {
			case err == nil:
				t.Errorf("the agent of %s updated %s of %s", other, p.what, owner)
			case !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'carve-node-own-node'") ||
				!strings.Contains(err.Error(), "carve-node of node "+other+" may not update "+p.what+", which is node "+owner+"'s"):
				t.Errorf("the agent of %s updating %s: %v, want the policy's refusal", other, p.what, err)
			default:
				t.Logf("%s's token: %v", other, err)
			}
		}
	}
	for _, p := range probes {
		if err := probeUpdate(own, p.obj(), p.name, p.status, true); err != nil {
			t.Errorf("the agent of %s updating its own %s (server dry run): %v", owner, p.what, err)
		}
	}

	deletePod(t, "fence-1")
	deleteClaim(t, "fence")
}

// nodeAgentClient is a client that authenticates as carve node's pod p
// does: with a token of its ServiceAccount bound to p.
func nodeAgentClient(t *testing.T, p *corev1.Pod) client.Client {
	t.Helper()
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: new(int64(600)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
	}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: p.Spec.ServiceAccountName, Namespace: p.Namespace}}
	if err := h.kc.SubResource("token").Create(context.Background(), sa, tr); err != nil {
		t.Fatalf("a token of %s bound to pod %s: %v", sa.Name, p.Name, err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", h.adminKC)
	if err != nil {
		t.Fatal(err)
	}
	// Only the token: the admin's client certificate would win.
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: h.kc.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// probeUpdate reads obj (cluster-scoped, name) as c, which may read
// everything, and writes it back as c, with an annotation added, or its
// status unchanged: either is an update the policy judges. dryRun makes it
// a server dry run. A conflict with the agent's own writes is retried.
func probeUpdate(c client.Client, obj client.Object, name string, status, dryRun bool) error {
	ctx := context.Background()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		if status {
			var opts []client.SubResourceUpdateOption
			if dryRun {
				opts = append(opts, client.DryRunAll)
			}
			return c.Status().Update(ctx, obj, opts...)
		}
		a := obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a["e2e.carve.dev/probe"] = "node-policy"
		obj.SetAnnotations(a)
		var opts []client.UpdateOption
		if dryRun {
			opts = append(opts, client.DryRunAll)
		}
		return c.Update(ctx, obj, opts...)
	})
}
