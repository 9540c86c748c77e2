//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/distribution/reference"
	godigest "github.com/opencontainers/go-digest"
)

// Both nodes run pods under containerd and runc (Debian's packages) with
// the CNI bridge plugin, configured here: the runtime a user's node has,
// in directories of the test's own.

// containerdConfig is a containerd 1.6 configuration (schema version 2).
// restrict_oom_score_adj: the development machines' root lacks
// CAP_SYS_RESOURCE, and without it every sandbox fails to start.
func containerdConfig(root, state, cniConfDir string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, root, state, filepath.Join(state, "containerd.sock"), pauseRef, cniConfDir)
}

// cniConfig is a node's pod network: a bridge with the node's own pod
// subnet, the bridge being the pods' gateway (where the kubernetes
// Service's address answers). No masquerade, no route out: pods reach
// their node and nothing else. IPAM state lives in dataDir.
func cniConfig(bridge, subnet, dataDir string) string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"carve-e2e","plugins":[`+
		`{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":false,`+
		`"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q}]],"routes":[{"dst":"0.0.0.0/0"}]}},`+
		`{"type":"loopback"}]}`, bridge, dataDir, subnet)
}

// The e2e's own images (scripts/k8s/images.sh), under localhost/ names no
// registry serves.
const (
	pauseRef   = "localhost/carve-e2e/pause:1"
	busyboxRef = "localhost/carve-e2e/busybox:1"
)

// stageImages copies the image archives a node imports into dir, each
// with the reference it is named by in the archive (NAME.name) and, one a
// line, those the CRI looks it up by (NAME.ref): the normalized reference
// (a pod's "busybox:1" is looked up with the default registry's name) and
// the normalized repository at the manifest's digest, which the release's
// manifests name. `ctr images import` names the image only as the archive
// does; a pull by digest would name it repository@digest, so the import
// tags it so (deploy/README.md, Install from a release).
func stageImages(dir string, archives map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, src := range archives {
		refs, err := criRefs(src)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, name)
		if err := os.Link(src, dst+".tar"); err != nil {
			return err
		}
		if err := os.WriteFile(dst+".name", []byte(refs[0]), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(dst+".ref", []byte(strings.Join(refs[1:], "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// criRefs: the archive's reference, then the normalized one and the
// normalized repository@digest.
func criRefs(src string) ([]string, error) {
	ref, digest, err := archiveImage(src)
	if err != nil {
		return nil, err
	}
	n, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return nil, fmt.Errorf("%s: reference %q: %w", src, ref, err)
	}
	d, err := reference.WithDigest(reference.TrimNamed(n), godigest.Digest(digest))
	if err != nil {
		return nil, fmt.Errorf("%s: digest %q: %w", src, digest, err)
	}
	return []string{ref, n.String(), d.String()}, nil
}

// archiveRef is the reference an OCI archive's one image is named by.
func archiveRef(path string) (string, error) {
	ref, _, err := archiveImage(path)
	return ref, err
}

// archiveImage is the reference and manifest digest of an OCI archive's
// one image.
func archiveImage(path string) (ref, digest string, err error) {
	out, err := exec.Command("tar", "-xOf", path, "index.json").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s: index.json: %w", path, errText(err))
	}
	var idx struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(out, &idx); err != nil {
		return "", "", fmt.Errorf("%s: index.json: %w", path, err)
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"] == "" {
		return "", "", fmt.Errorf("%s: want one image with a reference, index.json has %d manifests", path, len(idx.Manifests))
	}
	m := idx.Manifests[0]
	return m.Annotations["org.opencontainers.image.ref.name"], m.Digest, nil
}
