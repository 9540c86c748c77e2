package disks

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// ErrInvalid marks a declaration that does not validate: every error of
// Parse and Validate wraps it.
var ErrInvalid = errors.New("invalid disk declaration")

// Declaration is what an administrator writes: the volume groups Carve
// makes of which disks, on which nodes.
type Declaration struct {
	VolumeGroups []VGDecl `json:"volumeGroups"`
}

// VGDecl gives one volume group the disks it selects on the nodes it
// names. Nodes and NodeSelector pick the nodes (one of them, or neither
// for every node); Paths, MinSize, MaxSize and Model the disks (at least
// one of them; a disk must pass every one given).
type VGDecl struct {
	VG string `json:"volumeGroup"`
	// Nodes are node names.
	Nodes []string `json:"nodes,omitempty"`
	// NodeSelector selects nodes by their labels: every one must match.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Paths are absolute paths under /dev or path.Match globs of them
	// ("/dev/disk/by-id/nvme-Samsung*"), matched against a disk's kernel
	// name (/dev/sdb) and its /dev/disk/by-id and by-path links. A '*'
	// stops at '/', and '\' escapes: write udev's "\x20" as "\\x20".
	Paths []string `json:"paths,omitempty"`
	// MinSize and MaxSize bound a disk's size, as Kubernetes quantities
	// ("100Gi"); both inclusive.
	MinSize string `json:"minSize,omitempty"`
	MaxSize string `json:"maxSize,omitempty"`
	// Model is a path.Match glob of the disk's model as sysfs reports it
	// (trailing blanks trimmed); a disk with no model never matches it.
	Model string `json:"model,omitempty"`
}

// Parse reads a declaration from YAML or JSON and validates it. A field
// Carve does not know is an error, as is a key given twice: a typo must
// fail loudly, not select other disks.
func Parse(data []byte) (Declaration, error) {
	var d Declaration
	if err := yaml.UnmarshalStrict(data, &d); err != nil {
		return Declaration{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	d.normalize()
	if err := d.Validate(); err != nil {
		return Declaration{}, err
	}
	return d, nil
}

// normalize makes an empty list or map nil, as an absent one is, so that
// a declaration compares equal however it was written.
func (d *Declaration) normalize() {
	if len(d.VolumeGroups) == 0 {
		d.VolumeGroups = nil
	}
	for i := range d.VolumeGroups {
		v := &d.VolumeGroups[i]
		if len(v.Nodes) == 0 {
			v.Nodes = nil
		}
		if len(v.NodeSelector) == 0 {
			v.NodeSelector = nil
		}
		if len(v.Paths) == 0 {
			v.Paths = nil
		}
	}
}

// Validate checks every entry (validate.go) and that no two entries for
// the same volume group surely apply to one node (sameNodes); those whose
// selectors merely may overlap are caught by ForNode on the node where
// they do.
func (d Declaration) Validate() error {
	var errs []error
	for i, v := range d.VolumeGroups {
		errs = append(errs, v.validate(entryField(i))...)
		for j, w := range d.VolumeGroups[:i] {
			if v.VG == w.VG && sameNodes(v, w) {
				errs = append(errs, invalidf("%s.volumeGroup %q: declared again for nodes %s already has (%s)",
					entryField(i), v.VG, entryField(j), v.nodesText()))
			}
		}
	}
	return errors.Join(errs...)
}

// sameNodes tells two entries that apply to a common node whatever the
// nodes' labels: one applies to every node, they share a node name, or
// they have the same selector.
func sameNodes(a, b VGDecl) bool {
	switch {
	case a.allNodes() || b.allNodes():
		return true
	case a.NodeSelector != nil && b.NodeSelector != nil:
		return maps.Equal(a.NodeSelector, b.NodeSelector)
	}
	return slices.ContainsFunc(a.Nodes, func(n string) bool { return slices.Contains(b.Nodes, n) })
}

func (v VGDecl) allNodes() bool { return len(v.Nodes) == 0 && len(v.NodeSelector) == 0 }

// appliesTo tells whether the entry applies to the node name with labels.
func (v VGDecl) appliesTo(name string, labels map[string]string) bool {
	switch {
	case v.allNodes():
		return true
	case len(v.Nodes) > 0:
		return slices.Contains(v.Nodes, name)
	}
	for k, want := range v.NodeSelector {
		if got, ok := labels[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// nodesText says which nodes the entry applies to, for messages.
func (v VGDecl) nodesText() string {
	switch {
	case v.allNodes():
		return "every node"
	case len(v.Nodes) > 0:
		return "nodes " + strings.Join(v.Nodes, ", ")
	}
	keys := slices.Sorted(maps.Keys(v.NodeSelector))
	for i, k := range keys {
		keys[i] = k + "=" + v.NodeSelector[k]
	}
	return "nodes labelled " + strings.Join(keys, ",")
}

// ForNode returns the entries that apply to the node name with labels, in
// the declaration's order. Two entries for the same volume group both
// applying to it is an error: which disks make that group would depend on
// the order they were written in.
func (d Declaration) ForNode(name string, labels map[string]string) ([]VGDecl, error) {
	var out []VGDecl
	first := map[string]int{}
	for i, v := range d.VolumeGroups {
		if !v.appliesTo(name, labels) {
			continue
		}
		if j, dup := first[v.VG]; dup {
			return nil, invalidf("node %s: %s and %s both declare volume group %q (%s; %s): make their nodes disjoint",
				name, entryField(j), entryField(i), v.VG, d.VolumeGroups[j].nodesText(), v.nodesText())
		}
		first[v.VG] = i
		out = append(out, v)
	}
	return out, nil
}

func entryField(i int) string { return fmt.Sprintf("volumeGroups[%d]", i) }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
