package disks

import (
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"carve.dev/carve/lvm"
)

// devPrefix is where every declared path must lie: a path elsewhere is no
// device node, and one reaching out of /dev through ".." or a symlink's
// way is refused before any disk is looked at.
const devPrefix = "/dev/"

// validate checks one entry; at is its place ("volumeGroups[1]"), which
// every error names with the field.
func (v VGDecl) validate(at string) []error {
	var errs []error
	if err := lvm.ValidateVGName(v.VG); err != nil {
		errs = append(errs, invalidf("%s.volumeGroup: %v", at, err))
	}
	errs = append(errs, v.validateNodes(at)...)
	for i, p := range v.Paths {
		if err := validatePath(p); err != nil {
			errs = append(errs, invalidf("%s.paths[%d] %q: %v", at, i, p, err))
		}
	}
	errs = append(errs, v.validateSizes(at)...)
	if _, err := path.Match(v.Model, ""); err != nil {
		errs = append(errs, invalidf("%s.model %q: %v", at, v.Model, err))
	}
	// An entry selecting no disks would take every disk of its nodes.
	if len(v.Paths) == 0 && v.MinSize == "" && v.MaxSize == "" && v.Model == "" {
		errs = append(errs, invalidf("%s: selects no disks: give paths, minSize, maxSize or model", at))
	}
	return errs
}

// validateNodes checks the node names and the selector, and that the entry
// gives only one of them: with both, whether a node must be named and
// labelled, or either, would be a guess.
func (v VGDecl) validateNodes(at string) []error {
	var errs []error
	if len(v.Nodes) > 0 && len(v.NodeSelector) > 0 {
		errs = append(errs, invalidf("%s: give nodes or nodeSelector, not both", at))
	}
	for i, n := range v.Nodes {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			errs = append(errs, invalidf("%s.nodes[%d] %q: %s", at, i, n, strings.Join(msgs, "; ")))
		} else if slices.Index(v.Nodes, n) < i {
			errs = append(errs, invalidf("%s.nodes[%d] %q: named twice", at, i, n))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(v.NodeSelector)) {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, invalidf("%s.nodeSelector key %q: %s", at, k, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsValidLabelValue(v.NodeSelector[k]); len(msgs) > 0 {
			errs = append(errs, invalidf("%s.nodeSelector[%q] %q: %s", at, k, v.NodeSelector[k], strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// validatePath checks a declared path or glob: absolute, under /dev, with
// no ".." and written cleanly (a path.Match glob compares the text, so
// "/dev//sdb" would never match /dev/sdb), and a pattern path.Match takes.
func validatePath(p string) error {
	switch {
	case !strings.HasPrefix(p, devPrefix) || len(p) == len(devPrefix):
		return fmt.Errorf("is not a path under %s", devPrefix)
	case slices.Contains(strings.Split(p, "/"), ".."):
		return fmt.Errorf(`contains ".."`)
	case path.Clean(p) != p:
		return fmt.Errorf("is not clean: write it %q", path.Clean(p))
	case strings.IndexFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return fmt.Errorf("contains a blank or a control character")
	}
	if _, err := path.Match(p, ""); err != nil {
		return err
	}
	return nil
}

// validateSizes checks minSize and maxSize: quantities of bytes, positive,
// within what a disk's size can be, min no more than max.
func (v VGDecl) validateSizes(at string) []error {
	var errs []error
	lo, errLo := parseSize(v.MinSize)
	if errLo != nil {
		errs = append(errs, invalidf("%s.minSize %q: %v", at, v.MinSize, errLo))
	}
	hi, errHi := parseSize(v.MaxSize)
	if errHi != nil {
		errs = append(errs, invalidf("%s.maxSize %q: %v", at, v.MaxSize, errHi))
	}
	if errLo == nil && errHi == nil && v.MinSize != "" && v.MaxSize != "" && lo > hi {
		errs = append(errs, invalidf("%s: minSize %s is more than maxSize %s", at, v.MinSize, v.MaxSize))
	}
	return errs
}

// parseSize reads a size quantity in bytes, rounded up to a whole byte;
// "" is 0 (no bound).
func parseSize(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, err
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("is not positive")
	}
	// ParseQuantity clamps a binary quantity beyond int64 to its largest
	// value ("100Ei" reads as 8Ei-1): that is no size, and no disk is
	// near it.
	if q.CmpInt64(math.MaxInt64) >= 0 {
		return 0, fmt.Errorf("is too large")
	}
	return uint64(q.Value()), nil
}

// bounds are the entry's size bounds in bytes, max 0 for none; ok is false
// when they do not parse (an entry that did not validate), which selects
// no disk.
func (v VGDecl) bounds() (lo, hi uint64, ok bool) {
	lo, errLo := parseSize(v.MinSize)
	hi, errHi := parseSize(v.MaxSize)
	return lo, hi, errLo == nil && errHi == nil
}
