//go:build image

package image

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// The parts of the OCI image layout and image spec this test reads.
type (
	descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations"`
	}
	index struct {
		Manifests []descriptor `json:"manifests"`
	}
	manifest struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	imageConfig struct {
		Config struct {
			Entrypoint []string `json:"Entrypoint"`
			Cmd        []string `json:"Cmd"`
			User       string   `json:"User"`
		} `json:"config"`
	}
)

// file is one regular file or link of the image's merged filesystem.
type file struct {
	mode int64
	size int64
	link string
	data []byte // only for the files the test reads
}

// image is an OCI archive read into memory: its reference, config and the
// merged filesystem of its layers (whiteouts applied).
type image struct {
	ref         string
	config      imageConfig
	files       map[string]*file
	archiveSize int64
}

// size is the merged filesystem's size: what a container's root holds.
func (img *image) size() int64 {
	var n int64
	for _, f := range img.files {
		n += f.size
	}
	return n
}

// keep says which files' contents are read.
func keep(name string) bool {
	return name == "var/lib/dpkg/status" || name == "etc/lvm/lvm.conf"
}

// readArchive reads an oci-archive (a tar of an OCI image layout) with
// exactly one image.
func readArchive(p string) (*image, error) {
	blobs, idx, err := archiveBlobs(p)
	if err != nil {
		return nil, err
	}
	var ix index
	if err := json.Unmarshal(idx, &ix); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	if len(ix.Manifests) != 1 {
		return nil, fmt.Errorf("index.json: %d manifests, want 1", len(ix.Manifests))
	}
	img := &image{ref: ix.Manifests[0].Annotations["org.opencontainers.image.ref.name"], files: map[string]*file{}}
	var m manifest
	if err := blobJSON(p, blobs, ix.Manifests[0].Digest, &m); err != nil {
		return nil, err
	}
	if err := blobJSON(p, blobs, m.Config.Digest, &img.config); err != nil {
		return nil, err
	}
	for _, l := range m.Layers {
		if _, ok := blobs[l.Digest]; !ok {
			return nil, fmt.Errorf("layer %s is not in the archive", l.Digest)
		}
		if err := img.applyLayer(p, l); err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	}
	return img, nil
}

// archiveBlobs lists the archive's blobs (by digest) and returns its
// index.json.
func archiveBlobs(p string) (map[string]bool, []byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	blobs := map[string]bool{}
	var idx []byte
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		name := strings.TrimPrefix(h.Name, "./")
		switch {
		case name == "index.json":
			if idx, err = io.ReadAll(tr); err != nil {
				return nil, nil, err
			}
		case strings.HasPrefix(name, "blobs/sha256/"):
			blobs["sha256:"+path.Base(name)] = true
		}
	}
	if idx == nil {
		return nil, nil, fmt.Errorf("%s: no index.json: not an OCI archive", p)
	}
	return blobs, idx, nil
}

// openBlob returns a reader of one blob of the archive and its closer.
func openBlob(p, digest string) (io.Reader, func(), error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	tr := tar.NewReader(f)
	want := "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:")
	for {
		h, err := tr.Next()
		if err != nil {
			_ = f.Close()
			return nil, nil, fmt.Errorf("blob %s: %w", digest, err)
		}
		if strings.TrimPrefix(h.Name, "./") == want {
			return tr, func() { _ = f.Close() }, nil
		}
	}
}

func blobJSON(p string, blobs map[string]bool, digest string, v any) error {
	if !blobs[digest] {
		return fmt.Errorf("blob %s is not in the archive", digest)
	}
	r, done, err := openBlob(p, digest)
	if err != nil {
		return err
	}
	defer done()
	return json.NewDecoder(r).Decode(v)
}

// applyLayer merges one layer into the filesystem: whiteout files delete
// what lower layers had, as a container runtime's snapshotter does.
func (img *image) applyLayer(p string, l descriptor) error {
	r, done, err := openBlob(p, l.Digest)
	if err != nil {
		return err
	}
	defer done()
	switch {
	case strings.HasSuffix(l.MediaType, "+gzip"):
		zr, err := gzip.NewReader(r)
		if err != nil {
			return err
		}
		r = zr
	case strings.HasSuffix(l.MediaType, ".tar"):
	default:
		return fmt.Errorf("layer media type %s not read by this test", l.MediaType)
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		dir, base := path.Split(name)
		switch {
		case base == ".wh..wh..opq":
			img.removeUnder(strings.TrimSuffix(dir, "/"), false)
			continue
		case strings.HasPrefix(base, ".wh."):
			img.removeUnder(dir+strings.TrimPrefix(base, ".wh."), true)
			continue
		}
		f := &file{mode: h.Mode, size: h.Size, link: h.Linkname}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		if keep(name) {
			if f.data, err = io.ReadAll(tr); err != nil {
				return err
			}
		}
		img.files[name] = f
	}
}

// removeUnder deletes dir's contents (and dir itself with self).
func (img *image) removeUnder(dir string, self bool) {
	for name := range img.files {
		if (self && name == dir) || strings.HasPrefix(name, dir+"/") {
			delete(img.files, name)
		}
	}
}
