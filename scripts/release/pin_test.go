package main

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// writeArchive writes a minimal OCI archive: an index.json naming ref.
func writeArchive(t *testing.T, path, ref, digest string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	idx := fmt.Sprintf(`{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":%q,"size":1,"annotations":{"org.opencontainers.image.ref.name":%q}}]}`, digest, ref)
	tw := tar.NewWriter(f)
	if err := tw.WriteHeader(&tar.Header{Name: "index.json", Mode: 0o644, Size: int64(len(idx))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(idx)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func digestOf(s string) string { return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(s))) }

// releaseImages writes an archive per image the manifests name.
func releaseImages(t *testing.T) (string, map[string]image) {
	t.Helper()
	dir := t.TempDir()
	want := map[string]image{}
	for name := range valuesPath {
		im := image{Ref: "localhost/carve/" + name + ":v9.8.7", Digest: digestOf(name)}
		writeArchive(t, filepath.Join(dir, name+".tar"), im.Ref, im.Digest)
		want[name] = im
	}
	return dir, want
}

// copyFile copies the repository's file to a temporary one.
func copyFile(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func decode(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// TestPinRepositoryFiles pins the repository's own kustomize base and Helm
// values: every image is named by digest, and nothing else changed.
func TestPinRepositoryFiles(t *testing.T) {
	dir, images := releaseImages(t)
	kust := copyFile(t, "../../deploy/kubernetes/base/kustomization.yaml")
	values := copyFile(t, "../../deploy/helm/carve/values.yaml")
	before := map[string]map[string]any{kust: decode(t, kust), values: decode(t, values)}
	if err := runPin([]string{"-images", dir, "-kustomization", kust, "-values", values}, os.Getenv, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	// The kustomize base: newName and digest, no tag.
	k := decode(t, kust)
	var pinned []any
	for _, e := range k["images"].([]any) {
		m := e.(map[string]any)
		im := images[m["name"].(string)]
		want := map[string]any{"name": m["name"], "newName": im.Repository(), "digest": im.Digest}
		if !reflect.DeepEqual(m, want) {
			t.Errorf("kustomize image %v, want %v", m, want)
		}
		pinned = append(pinned, want)
	}
	before[kust]["images"] = pinned
	// The values: repository and digest, the rest (tag, ports) as it was.
	v := decode(t, values)
	for name, path := range valuesPath {
		got, old := v, before[values]
		for _, key := range path {
			got, old = got[key].(map[string]any), old[key].(map[string]any)
		}
		if got["repository"] != images[name].Repository() || got["digest"] != images[name].Digest {
			t.Errorf("values %s: %v", strings.Join(path, "."), got)
		}
		old["repository"], old["digest"] = got["repository"], got["digest"]
	}
	for path, m := range map[string]map[string]any{kust: k, values: v} {
		if !reflect.DeepEqual(m, before[path]) {
			t.Errorf("%s: pinning changed more than the images", filepath.Base(path))
		}
	}
	// Comments stay: the files remain documentation.
	for _, path := range []string{kust, values} {
		if b, _ := os.ReadFile(path); !strings.Contains(string(b), "\n# ") {
			t.Errorf("%s lost its comments", filepath.Base(path))
		}
	}
}

// TestPinRefuses: a missing or unknown archive, an archive that is not
// one, and a kustomization naming an image the release lacks are errors.
func TestPinRefuses(t *testing.T) {
	kust := copyFile(t, "../../deploy/kubernetes/base/kustomization.yaml")
	values := copyFile(t, "../../deploy/helm/carve/values.yaml")
	pin := func(dir string) error {
		return runPin([]string{"-images", dir, "-kustomization", kust, "-values", values}, os.Getenv, io.Discard, io.Discard)
	}
	dir, _ := releaseImages(t)
	if err := os.Remove(filepath.Join(dir, "csi-resizer.tar")); err != nil {
		t.Fatal(err)
	}
	if err := pin(dir); err == nil || !strings.Contains(err.Error(), "csi-resizer.tar") {
		t.Errorf("missing archive: %v", err)
	}
	dir, _ = releaseImages(t)
	writeArchive(t, filepath.Join(dir, "extra.tar"), "localhost/carve/extra:v1", digestOf("x"))
	if err := pin(dir); err == nil || !strings.Contains(err.Error(), "extra.tar") {
		t.Errorf("extra archive: %v", err)
	}
	dir, _ = releaseImages(t)
	writeArchive(t, filepath.Join(dir, "carve.tar"), "carve@sha256:abc", digestOf("x"))
	if err := pin(dir); err == nil || !strings.Contains(err.Error(), "not a repository with a tag") {
		t.Errorf("bad reference: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "carve.tar"), []byte("not a tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pin(dir); err == nil {
		t.Error("a file that is no archive was read")
	}
	dir, _ = releaseImages(t)
	b, _ := os.ReadFile(kust)
	if err := os.WriteFile(kust, []byte(strings.Replace(string(b), "name: csi-resizer", "name: csi-other", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := pin(dir); err == nil || !strings.Contains(err.Error(), "csi-other is no image") {
		t.Errorf("unknown kustomize image: %v", err)
	}
}
