// Package nodepath decides whether a staging or target path a CO sends may
// be used by the node at all: the CO's own directory holds every path it
// hands out (kubelet's root directory), so a path anywhere else — /etc,
// /proc/sys, the root of the host, a relative path, a path with "..", a
// newline — is a mistake, and acting on it could expose, hide or delete
// what is not the CO's. The checks here are the same for every node call;
// whether the thing at the path is a given volume's is the caller's check.
package nodepath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"carve.dev/carve/driver/volume"
)

// DefaultRoot is kubelet's root directory, where it puts every staging and
// target path.
const DefaultRoot = "/var/lib/kubelet"

// Linux limits: PATH_MAX counts the terminating NUL, NAME_MAX does not.
const (
	maxPathLen = 4095
	maxNameLen = 255
)

// Root is the directory every path must lie strictly inside.
type Root struct{ dir string }

// NewRoot checks dir as a root: absolute, clean, not "/".
func NewRoot(dir string) (Root, error) {
	if err := lexical(dir); err != nil {
		return Root{}, fmt.Errorf("path root: %w", err)
	}
	if dir == "/" {
		return Root{}, fmt.Errorf("path root: %w: %q would let paths reach anything on the host", volume.ErrInvalidPath, dir)
	}
	return Root{dir: dir}, nil
}

// Dir is the root directory as configured.
func (r Root) Dir() string { return r.dir }

// Check is the check on the path's text, before anything on the host is
// looked at: absolute, already clean (no "..", ".", "//" or trailing "/":
// filepath.Clean would change it), no control characters, within Linux's
// length limits, and strictly inside the root (the root itself is not a
// path a CO hands out). A root that is a symlink is honoured under both
// its names, as a CO may hand out either.
func (r Root) Check(path string) error {
	if err := lexical(path); err != nil {
		return err
	}
	if r.inside(path) {
		return nil
	}
	return fmt.Errorf("%w: %q is not inside %s, the CO's directory (--path-root)", volume.ErrInvalidPath, path, r.dir)
}

// lexical is Check without the root.
func lexical(path string) error {
	switch {
	case path == "":
		return fmt.Errorf("%w: empty", volume.ErrInvalidPath)
	case len(path) > maxPathLen:
		return fmt.Errorf("%w: %d bytes, longer than Linux allows (%d)", volume.ErrInvalidPath, len(path), maxPathLen)
	case strings.IndexFunc(path, isControl) >= 0:
		return fmt.Errorf("%w: %q holds a control character or a space other than U+0020", volume.ErrInvalidPath, path)
	case !filepath.IsAbs(path):
		return fmt.Errorf("%w: %q is not absolute", volume.ErrInvalidPath, path)
	case filepath.Clean(path) != path:
		return fmt.Errorf("%w: %q is not clean (it should read %q)", volume.ErrInvalidPath, path, filepath.Clean(path))
	}
	for _, name := range strings.Split(path, "/") {
		if len(name) > maxNameLen {
			return fmt.Errorf("%w: a name in %q is longer than Linux allows (%d)", volume.ErrInvalidPath, path, maxNameLen)
		}
	}
	return nil
}

// isControl: a control character, or white space other than ' ' (the
// kernel escapes space, tab, newline and backslash in its mount tables,
// but no other space; mount-utils, whose IsMountPoint the node uses,
// splits the lines of /proc/mounts at any Unicode space when it reads
// them, so a mount at "/a\u00a0b" would be read as one at "/a").
func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || (r != ' ' && unicode.IsSpace(r))
}

// Contains tells whether a clean absolute path lies strictly inside the
// root (under either of its names), with no other check.
func (r Root) Contains(path string) bool { return r.inside(path) }

// inside tells whether a clean absolute path lies strictly inside the root
// or inside what the root resolves to.
func (r Root) inside(path string) bool {
	if within(path, r.dir) {
		return true
	}
	resolved, err := filepath.EvalSymlinks(r.dir)
	return err == nil && resolved != r.dir && within(path, resolved)
}

// within: path is strictly below dir (both clean and absolute, dir not "/").
func within(path, dir string) bool {
	return strings.HasPrefix(path, dir+"/")
}

// Resolve checks a path that passed Check as it stands on the host, and
// tells whether it exists. The path itself must not be a symlink (no CO
// hands out one, and a mount or removal would act on where it points),
// and its parent, symlinks followed, must still lie inside the root (or be
// the root): a symlink on the way must not lead out of it. A missing
// parent is an error wrapping fs.ErrNotExist.
func (r Root) Resolve(path string) (exists bool, err error) {
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return false, fmt.Errorf("%w: %s is a symlink", volume.ErrInvalidPath, path)
	case err == nil:
		exists = true
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("%s: %w", path, err)
	}
	parent, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return false, fmt.Errorf("parent of %s: %w", path, err)
	}
	if parent != r.dir && !r.inside(parent) && !r.isRoot(parent) {
		return false, fmt.Errorf("%w: %s leads to %s, outside %s", volume.ErrInvalidPath, path, parent, r.dir)
	}
	return exists, nil
}

// isRoot tells whether a resolved path is the root's own directory.
func (r Root) isRoot(path string) bool {
	resolved, err := filepath.EvalSymlinks(r.dir)
	return err == nil && resolved == path
}
