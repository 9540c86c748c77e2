//go:build e2e

package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readCSISeconds scrapes carve controller's and the VM's carve node's
// /metrics (port 8080): the controller's from here (the host node's pods
// are on this network), the node's from the VM (the host cannot route to
// the VM's pods, nor the VM to the host's).
func readCSISeconds(t *testing.T) csiSeconds {
	t.Helper()
	out := csiSeconds{}
	for _, component := range []string{"controller", "node"} {
		url := "http://" + carvePodIP(t, component) + ":8080/metrics"
		var text string
		var err error
		if component == "node" {
			text, err = nodeVM(t, vmNode).sh("busybox", "wget", "-q", "-O", "-", url)
		} else {
			text, err = httpGet(url)
		}
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

// httpGet reads url's body.
func httpGet(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
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
