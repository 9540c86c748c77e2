//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readCSISeconds scrapes carve controller's and the VM's carve node's
// /metrics (port 8080), from the VM (pod IPs are routed between nodes).
func readCSISeconds(t *testing.T) csiSeconds {
	t.Helper()
	out := csiSeconds{}
	for _, component := range []string{"controller", "node"} {
		ip := carvePodIP(t, component)
		text, err := h.vm.sh("busybox", "wget", "-q", "-O", "-", "http://"+ip+":8080/metrics")
		if err != nil {
			t.Fatalf("carve %s's metrics: %v", component, err)
		}
		for _, line := range strings.Split(text, "\n") {
			if method, v, ok := operationSeconds(line); ok {
				out[method] += v
			}
		}
	}
	return out
}

// carvePodIP is the IP of carve's pod of component, the node's on the VM.
func carvePodIP(t *testing.T, component string) string {
	t.Helper()
	var pods corev1.PodList
	err := h.kc.List(context.Background(), &pods, client.InNamespace(driverNS),
		client.MatchingLabels{"app.kubernetes.io/component": component})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.PodIP != "" && (component != "node" || p.Spec.NodeName == vmNode) {
			return p.Status.PodIP
		}
	}
	t.Fatalf("no carve %s pod with an IP", component)
	return ""
}
