package nodefs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"carve.dev/carve/driver/volume"
)

// PrepareTarget makes path ready to be mounted on: a directory, or for a
// device node an empty file. A missing path is created, but never its
// parent: the CO creates the directories it hands out paths in, so a
// missing parent means a wrong path, and creating a chain of directories
// could write into whatever filesystem it lands on. An existing path must
// be of the right kind and, unless it is a mount point already (a retry,
// which the caller's idempotency check handles), empty.
func (m *Mounter) PrepareTarget(path string, dir bool) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return create(path, dir)
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%w: %s is a symlink", volume.ErrUnsafeTarget, path)
	}
	if fi.IsDir() != dir {
		return fmt.Errorf("%w: %s exists and is a directory=%t, a directory=%t is needed", volume.ErrUnsafeTarget, path, fi.IsDir(), dir)
	}
	if mounted, err := m.IsMountPoint(path); err != nil || mounted {
		return err
	}
	return checkEmpty(path, fi)
}

// create makes the missing leaf of path: a directory, or an empty file.
func create(path string, dir bool) error {
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("%w: the directory that would hold %s (the CO creates it): %w", volume.ErrUnsafeTarget, path, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory to hold %s (the CO creates it)", volume.ErrUnsafeTarget, filepath.Dir(path), path)
	}
	if dir {
		return os.Mkdir(path, 0o750)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

// checkEmpty is nil for an empty directory or an empty regular file: what
// Carve creates, or what a CO prepares for it.
func checkEmpty(path string, fi os.FileInfo) error {
	switch {
	case fi.Mode().IsRegular() && fi.Size() == 0:
		return nil
	case fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is a file with %d bytes", volume.ErrUnsafeTarget, path, fi.Size())
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is a %s", volume.ErrUnsafeTarget, path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("%w: %s is a directory with content (%s, ...), not a mount", volume.ErrUnsafeTarget, path, names[0])
	}
	return nil
}

// removeTarget removes what Carve creates at a path it mounted on once the
// mount is gone: an empty directory or an empty file. Anything else is
// left in place and refused. A missing path is nil.
func removeTarget(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := checkEmpty(path, fi); err != nil {
		return err
	}
	// Remove, never RemoveAll: if the directory filled up since the check,
	// this fails rather than deleting what is in it.
	switch err := os.Remove(path); {
	case errors.Is(err, syscall.ENOTEMPTY):
		return fmt.Errorf("%w: %s is no longer empty", volume.ErrUnsafeTarget, path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
