package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
)

// image is one OCI image archive of the release: the reference it is
// named by in the archive and its manifest's digest, which is what a
// registry or a runtime knows it by once loaded (renaming it does not
// change it).
type image struct {
	Ref    string // e.g. localhost/carve/carve:v0.1.0
	Digest string // sha256:<64 hex>
}

// Repository is the reference without its tag.
func (i image) Repository() string {
	m := refPattern.FindStringSubmatch(i.Ref)
	return m[1]
}

// Pinned is the reference a manifest names: the repository at the digest.
func (i image) Pinned() string { return i.Repository() + "@" + i.Digest }

var (
	digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// A reference with a tag and without a digest, as buildah names an
	// image in an archive; the repository is the part before the tag.
	refPattern = regexp.MustCompile(`^([a-z0-9]+(?:[._-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)+):([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$`)
)

// The part of the OCI image layout's index.json read here.
type ociIndex struct {
	Manifests []struct {
		Digest      string            `json:"digest"`
		Annotations map[string]string `json:"annotations"`
	} `json:"manifests"`
}

// readArchive reads the one image of an OCI archive (buildah push
// oci-archive:) from its index.json.
func readArchive(path string) (image, error) {
	f, err := os.Open(path)
	if err != nil {
		return image{}, err
	}
	defer func() { _ = f.Close() }()
	idx, err := indexOf(tar.NewReader(f))
	if err != nil {
		return image{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(idx.Manifests) != 1 {
		return image{}, fmt.Errorf("%s: %d images in the archive, want 1", path, len(idx.Manifests))
	}
	m := idx.Manifests[0]
	im := image{Ref: m.Annotations["org.opencontainers.image.ref.name"], Digest: m.Digest}
	if !refPattern.MatchString(im.Ref) {
		return image{}, fmt.Errorf("%s: reference %q is not a repository with a tag", path, im.Ref)
	}
	if !digestPattern.MatchString(im.Digest) {
		return image{}, fmt.Errorf("%s: manifest digest %q is not sha256", path, im.Digest)
	}
	return im, nil
}

// indexOf finds and decodes index.json in the archive.
func indexOf(tr *tar.Reader) (ociIndex, error) {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return ociIndex{}, errors.New("no index.json: not an OCI archive")
		}
		if err != nil {
			return ociIndex{}, err
		}
		if h.Name != "index.json" && h.Name != "./index.json" {
			continue
		}
		var idx ociIndex
		if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&idx); err != nil {
			return ociIndex{}, fmt.Errorf("index.json: %w", err)
		}
		return idx, nil
	}
}
