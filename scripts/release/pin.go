package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// valuesPath is where the Helm chart's values.yaml holds each image the
// release ships (the kustomize base names them by the same names).
var valuesPath = map[string][]string{
	"carve":           {"image"},
	"csi-provisioner": {"sidecars", "provisioner"},
	"csi-attacher":    {"sidecars", "attacher"},
	"csi-resizer":     {"sidecars", "resizer"},
	"csi-snapshotter": {"sidecars", "snapshotter"},
}

// runPin edits the release's copies of the kustomize base and the Helm
// values so that every image is named by its digest: what a user applies
// runs exactly the images the release's archives hold, whatever a tag
// comes to name later. Comments and order stay (yaml.v3's node tree).
func runPin(args []string, _ func(string) string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("pin", flag.ContinueOnError)
	dir := fs.String("images", "", "directory of the release's image archives, NAME.tar")
	kust := fs.String("kustomization", "", "the kustomize base's kustomization.yaml, edited in place")
	values := fs.String("values", "", "the Helm chart's values.yaml, edited in place")
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if *dir == "" || *kust == "" || *values == "" {
		return usageError{fmt.Errorf("-images, -kustomization and -values are required")}
	}
	images, err := readImages(*dir)
	if err != nil {
		return err
	}
	if err := editYAML(*kust, func(doc *yaml.Node) error { return pinKustomization(doc, images) }); err != nil {
		return err
	}
	return editYAML(*values, func(doc *yaml.Node) error { return pinValues(doc, images) })
}

// readImages reads every NAME.tar of dir: exactly the images valuesPath
// knows, no more, no fewer.
func readImages(dir string) (map[string]image, error) {
	images := map[string]image{}
	for name := range valuesPath {
		im, err := readArchive(filepath.Join(dir, name+".tar"))
		if err != nil {
			return nil, err
		}
		images[name] = im
	}
	all, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		return nil, err
	}
	for _, a := range all {
		if _, ok := images[strings.TrimSuffix(filepath.Base(a), ".tar")]; !ok {
			return nil, fmt.Errorf("%s: not an image the manifests name", a)
		}
	}
	return images, nil
}

// pinKustomization sets each images: entry's newName and digest and drops
// its newTag (kustomize writes newName@digest).
func pinKustomization(doc *yaml.Node, images map[string]image) error {
	list := lookup(doc.Content[0], "images")
	if list == nil || list.Kind != yaml.SequenceNode {
		return fmt.Errorf("no images: list")
	}
	seen := map[string]bool{}
	for _, entry := range list.Content {
		name := lookup(entry, "name")
		if name == nil {
			return fmt.Errorf("images: an entry without a name")
		}
		im, ok := images[name.Value]
		if !ok {
			return fmt.Errorf("images: %s is no image of the release", name.Value)
		}
		set(entry, "newName", im.Repository())
		remove(entry, "newTag")
		set(entry, "digest", im.Digest)
		seen[name.Value] = true
	}
	return allSeen(seen, images, "images:")
}

// pinValues sets each image value's repository and digest (the chart's
// carve.image then writes repository@digest).
func pinValues(doc *yaml.Node, images map[string]image) error {
	seen := map[string]bool{}
	for name, path := range valuesPath {
		v := doc.Content[0]
		for _, key := range path {
			if v = lookup(v, key); v == nil {
				return fmt.Errorf("no %s", strings.Join(path, "."))
			}
		}
		if lookup(v, "digest") == nil {
			return fmt.Errorf("%s has no digest value to set", strings.Join(path, "."))
		}
		set(v, "repository", images[name].Repository())
		set(v, "digest", images[name].Digest)
		seen[name] = true
	}
	return allSeen(seen, images, "values")
}

func allSeen(seen map[string]bool, images map[string]image, where string) error {
	var missing []string
	for name := range images {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		return fmt.Errorf("%s names no %s", where, strings.Join(missing, ", "))
	}
	return nil
}

// editYAML rewrites one YAML file through edit, two-space indented.
func editYAML(path string, edit func(*yaml.Node) error) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("%s: not a YAML mapping", path)
	}
	if err := edit(&doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// lookup is a mapping node's value for key, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// set gives key a plain string value, adding it last if missing.
func set(m *yaml.Node, key, value string) {
	if v := lookup(m, key); v != nil {
		v.Kind, v.Tag, v.Value, v.Style = yaml.ScalarNode, "!!str", value, 0
		return
	}
	m.Content = append(m.Content,
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value})
}

// remove drops key from a mapping.
func remove(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}
