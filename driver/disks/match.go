package disks

import (
	"cmp"
	"path"
	"slices"
	"strings"
)

// Match returns the disks the entry selects, sorted by path: a disk must
// pass every selector the entry gives. A Special disk is selected only by
// a path naming it exactly, never by a glob, a size or a model.
func Match(d VGDecl, disks []Disk) []Disk {
	lo, hi, ok := d.bounds()
	if !ok {
		return nil
	}
	var out []Disk
	for _, disk := range disks {
		if d.pathMatches(disk, !disk.Special) && disk.Size >= lo && (hi == 0 || disk.Size <= hi) && d.modelMatches(disk) {
			out = append(out, disk)
		}
	}
	slices.SortFunc(out, func(a, b Disk) int { return cmp.Compare(a.Path, b.Path) })
	return out
}

// pathMatches tells whether a path of the entry matches the disk's path or
// one of its links; with globs false only a path with no glob characters
// counts, one naming the disk exactly. An entry with no paths passes every
// disk globs may select.
func (d VGDecl) pathMatches(disk Disk, globs bool) bool {
	if len(d.Paths) == 0 {
		return globs
	}
	return slices.ContainsFunc(d.Paths, func(p string) bool {
		if !globs && strings.ContainsAny(p, `*?[\`) {
			return false
		}
		return globMatch(p, disk.Path) || slices.ContainsFunc(disk.Links, func(l string) bool { return globMatch(p, l) })
	})
}

// modelMatches: no model glob passes every disk; one passes only a disk
// with a model, so that "*" does not take disks that report none.
func (d VGDecl) modelMatches(disk Disk) bool {
	return d.Model == "" || disk.Model != "" && globMatch(d.Model, disk.Model)
}

// globMatch is path.Match with a bad pattern matching nothing (Validate
// refuses one).
func globMatch(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}
