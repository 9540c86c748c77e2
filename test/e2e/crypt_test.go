//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestEncryptedVolume: deploy/'s encrypted class with its Secret (the
// example's template, given a random passphrase): a pod writes a pattern
// through the filesystem; the volume's LV on the VM node is LUKS2 and holds
// no trace of the pattern; a snapshot of it, restored in the same class,
// opens with the same passphrase and holds the data; and the passphrase is
// in no component's log, no event and not in carve node's metrics.
func TestEncryptedVolume(t *testing.T) {
	fullRunOnly(t)
	t.Parallel()
	passphrase := applyEncryptionSecret(t)
	const class, src, snap, dst = "carve-encrypted", "enc-src", "enc-snap", "enc-restored"
	create(t, pvc(src, class, "256Mi"))
	p := runPod(t, src+"-1", src)
	pattern := "CARVE-E2E-PLAINTEXT-" + randomHex(t, 8)
	writeData(t, p, "state", strings.Repeat(pattern, 64))
	pv := boundClaim(t, src).Spec.VolumeName
	lvDev := "/dev/e2e/" + pv
	vm := podVM(t, p)
	if out, err := vm.sh("blkid", "-p", "-o", "value", "-s", "TYPE", lvDev); strings.TrimSpace(out) != "crypto_LUKS" {
		t.Fatalf("blkid %s: %q, %v; want crypto_LUKS", lvDev, out, err)
	}
	if _, err := vm.sh("blockdev", "--flushbufs", lvDev); err != nil {
		t.Fatal(err)
	}
	// grep -c counts matching lines: 0 (and exit 1) when the LV holds none.
	if out, _ := vm.sh("grep", "-a", "-c", "-F", pattern, lvDev); strings.TrimSpace(out) != "0" {
		t.Fatalf("grep for the pattern in the raw LV %s: %q, want 0: the plaintext is on the disk", lvDev, out)
	}

	vs := takeSnapshot(t, snap, src)
	create(t, restoreClaim(dst, class, "256Mi", snap))
	p2 := runPodWith(t, dst+"-1", dst, onNode(p.Spec.NodeName))
	if got := readData(t, p2, "state"); got != strings.Repeat(pattern, 64) {
		t.Errorf("restored encrypted volume holds %d bytes, not the snapshot's data", len(got))
	}

	noPassphraseAnywhere(t, passphrase, p)
	deletePod(t, dst+"-1")
	deletePod(t, src+"-1")
	deleteSnapshot(t, vs)
	deleteClaim(t, dst)
	deleteClaim(t, src)
}

// applyEncryptionSecret creates the class's Secret from deploy/'s template
// with a random passphrase, which it returns.
func applyEncryptionSecret(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(h.repo, "deploy/kubernetes/examples/secret/encryption-key.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	if err := yaml.UnmarshalStrict(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.StringData["encryptionKey"] != "REPLACE-ME" {
		t.Fatalf("the example Secret's encryptionKey is not the placeholder")
	}
	passphrase := "e2e-" + randomHex(t, 16)
	s.StringData["encryptionKey"] = passphrase
	create(t, &s)
	t.Cleanup(func() { _ = h.kc.Delete(context.Background(), &s) })
	return passphrase
}

// noPassphraseAnywhere looks for the passphrase where Carve could have put
// it: every component's log (both nodes' kubelet and containerd, every
// pod's containers: h.logs; the control plane's: the cluster's logs), every
// event, and carve node's metrics on the node of pod p.
func noPassphraseAnywhere(t *testing.T, passphrase string, p *corev1.Pod) {
	t.Helper()
	files, carveNode := 0, false
	for _, dir := range []string{h.logs, filepath.Join(h.work, "cluster", "logs")} {
		n := 0
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !d.Type().IsRegular() {
				return err
			}
			n++
			carveNode = carveNode || strings.Contains(path, "carve-node")
			b, err := os.ReadFile(path)
			if err == nil && strings.Contains(string(b), passphrase) {
				t.Errorf("the passphrase is in %s", path)
			}
			return err
		})
		if err != nil || n == 0 {
			t.Errorf("read the logs under %s: %d files, %v", dir, n, err)
		}
		files += n
	}
	if !carveNode {
		t.Error("no log of a carve node container was read: the check missed carve itself")
	}
	var evs corev1.EventList
	if err := h.kc.List(context.Background(), &evs); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, passphrase) {
			t.Errorf("the passphrase is in event %s/%s", e.Namespace, e.Name)
		}
	}
	node := carvePod(t, "node", p.Spec.NodeName)
	metrics, err := podVM(t, p).sh("busybox", "wget", "-q", "-O", "-", "http://"+node.Status.PodIP+":8080/metrics")
	if err != nil || !strings.Contains(metrics, "carve_commands_total") {
		t.Fatalf("carve node's metrics: %v (%d bytes)", err, len(metrics))
	}
	if strings.Contains(metrics, passphrase) {
		t.Error("the passphrase is in carve node's metrics")
	}
	t.Logf("no passphrase in %d log files, %d events or carve node's metrics", files, len(evs.Items))
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
