package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// imageArchives lists the image archives the nodes import: the release's
// (scripts/release.sh --from-image: Carve's and the sidecars', which its
// manifests name by digest) and those scripts/k8s/images.sh made (its refs
// file names them).
func imageArchives(release, dir string) (map[string]string, error) {
	m := map[string]string{}
	tars, err := filepath.Glob(filepath.Join(release, "images", "*.tar"))
	if err != nil {
		return nil, err
	}
	for _, a := range tars {
		m[strings.TrimSuffix(filepath.Base(a), ".tar")] = a
	}
	if m["carve"] == "" {
		return nil, fmt.Errorf("release %s: no images/carve.tar", release)
	}
	return m, refArchives(m, dir)
}

// refArchives adds to m the archives of dir that its refs file names
// (scripts/k8s/images.sh's: the test's pods' images, or the upstream
// suite's), each by its name.
func refArchives(m map[string]string, dir string) error {
	f, err := os.Open(filepath.Join(dir, "refs"))
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, _, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			return fmt.Errorf("%s/refs: bad line %q", dir, sc.Text())
		}
		m[name] = filepath.Join(dir, name+".tar")
	}
	return sc.Err()
}
