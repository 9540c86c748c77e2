//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The run starts on deploy/'s kustomize install (installCarve). Here Carve's
// Helm chart takes over, installed as deploy/README.md tells a user to, and
// serves every scenario that runs after this one: the side-by-side ones
// (provisioning, resize, snapshots, volume and access modes) and the
// restarts. A volume made under the kustomize install is read and deleted
// under the Helm release, as when a user moves from one to the other.
const helmRelease = "carve"

func TestHelmTakesOver(t *testing.T) {
	fullRunOnly(t)
	create(t, pvc("handover", "carve-thick", "64Mi"))
	p := runPod(t, "handover-1", "handover")
	pvName := boundClaim(t, "handover").Spec.VolumeName
	writeData(t, p, "before", "written under kustomize")
	deletePod(t, "handover-1")
	waitDetached(t, pvName, "under kustomize")

	if err := h.removeKustomizeInstall(); err != nil {
		t.Fatal(err)
	}
	if err := h.helmInstall(); err != nil {
		t.Fatal(err)
	}
	out, err := h.helm("status", helmRelease, "--namespace", driverNS)
	if err != nil || !strings.Contains(out, "STATUS: deployed") {
		t.Fatalf("helm status: %v\n%s", err, out)
	}
	for _, c := range []struct{ component, node string }{
		{"controller", hostNode}, {"node", vmNode}, {"node", vmNode2}, {"node", hostNode}} {
		if err := releasePod(carvePod(t, c.component, c.node)); err != nil {
			t.Errorf("carve %s pod on %s: %v", c.component, c.node, err)
		}
	}
	if err := h.checkContainerised(); err != nil {
		t.Fatal(err)
	}

	q := runPod(t, "handover-2", "handover")
	if got := readData(t, q, "before"); got != "written under kustomize" {
		t.Errorf("under the Helm release the volume holds %q", got)
	}
	writeData(t, q, "after", "written under helm")
	deletePod(t, "handover-2")
	deleteClaim(t, "handover")
}

// releasePod checks that the workload owning p (its DaemonSet, or the
// ReplicaSet of its Deployment, which carries the Deployment's
// annotations) is the Helm release's.
func releasePod(p *corev1.Pod) error {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return fmt.Errorf("pod %s has no owner", p.Name)
	}
	owner := &unstructured.Unstructured{}
	owner.SetAPIVersion(ref.APIVersion)
	owner.SetKind(ref.Kind)
	if err := h.kc.Get(context.Background(), types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, owner); err != nil {
		return err
	}
	if a := owner.GetAnnotations(); a["meta.helm.sh/release-name"] != helmRelease || p.Labels["app.kubernetes.io/instance"] != helmRelease {
		return fmt.Errorf("not the release's: pod %s labels %v, its %s %s annotations %v", p.Name, p.Labels, ref.Kind, ref.Name, a)
	}
	return nil
}

// helm runs helm on the test's cluster, its cache and config in the test's
// work dir, and returns its stdout.
func (x *harness) helm(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(x.kbin, "helm"), append([]string{"--kubeconfig=" + x.adminKC}, args...)...)
	dir := filepath.Join(x.work, "helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir+"/cache", "HELM_CONFIG_HOME="+dir+"/config",
		"HELM_DATA_HOME="+dir+"/data")
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w", strings.Join(args, " "), errText(err))
	}
	return string(out), nil
}

// helmInstall installs the release's chart (its images pinned by digest)
// with test/e2e/helm-values.yaml and waits
// for its pods, as installCarve does for the kustomize install.
func (x *harness) helmInstall() error {
	start := time.Now()
	// Set first: teardown uninstalls whatever part of the release was made.
	x.helmInstalled = true
	charts, err := filepath.Glob(filepath.Join(x.release, "carve-*.tgz"))
	if err != nil || len(charts) != 1 {
		return fmt.Errorf("release %s: want one chart carve-*.tgz, found %v (%v)", x.release, charts, err)
	}
	out, err := x.helm("install", helmRelease, charts[0],
		"--namespace", driverNS,
		"--values", filepath.Join(x.repo, "test/e2e/helm-values.yaml"), "--wait", "--timeout", "5m")
	if err != nil {
		return err
	}
	logf("helm install in %s:\n%s", time.Since(start).Round(100*time.Millisecond), out)
	return x.waitCarveReady()
}

// removeKustomizeInstall deletes what installCarve applied but the
// Namespace and the CRDs, which the chart's release shares (Helm leaves
// CRDs that exist alone), and waits for Carve's pods to be gone.
func (x *harness) removeKustomizeInstall() error {
	rendered, err := os.ReadFile(filepath.Join(x.work, "rendered.yaml"))
	if err != nil {
		return err
	}
	keep := map[string]bool{"Namespace": true, "CustomResourceDefinition": true}
	docs, err := withoutKinds(rendered, keep)
	if err != nil {
		return err
	}
	path := filepath.Join(x.work, "rendered-without-namespace-and-crds.yaml")
	if err := os.WriteFile(path, docs, 0o644); err != nil {
		return err
	}
	if _, err := x.kubectl("delete", "--wait=true", "--timeout=3m", "-f", path); err != nil {
		return err
	}
	return x.waitFor("the kustomize install's pods gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		err := x.kc.List(ctx, &pods, client.InNamespace(driverNS), client.HasLabels{"app.kubernetes.io/component"})
		return len(pods.Items) == 0, err
	})
}

// withoutKinds returns the documents of a multi-document YAML stream whose
// kind is not in drop.
func withoutKinds(stream []byte, drop map[string]bool) ([]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out bytes.Buffer
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("a rendered document: %w", err)
		}
		if tm.Kind == "" || drop[tm.Kind] {
			continue
		}
		out.WriteString("---\n")
		out.Write(doc)
	}
}
