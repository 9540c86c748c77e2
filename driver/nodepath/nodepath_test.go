package nodepath

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"carve.dev/carve/driver/volume"
)

func mustRoot(t testing.TB, dir string) Root {
	t.Helper()
	r, err := NewRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewRoot(t *testing.T) {
	for _, bad := range []string{"", "/", "var/lib/kubelet", "/var/lib/kubelet/", "/var/lib/../lib/kubelet", "/a\nb"} {
		if _, err := NewRoot(bad); !errors.Is(err, volume.ErrInvalidPath) {
			t.Errorf("NewRoot(%q) = %v, want volume.ErrInvalidPath", bad, err)
		}
	}
	if r := mustRoot(t, DefaultRoot); r.Dir() != DefaultRoot {
		t.Errorf("Dir() = %q", r.Dir())
	}
}

func TestCheck(t *testing.T) {
	r := mustRoot(t, "/var/lib/kubelet")
	for _, ok := range []string{
		"/var/lib/kubelet/x",
		"/var/lib/kubelet/pods/0a1b/volumes/kubernetes.io~csi/pvc-1/mount",
		"/var/lib/kubelet/plugins/kubernetes.io/csi/lvm.carve.dev/abc/globalmount",
		"/var/lib/kubelet/with space/and\\backslash",
		"/var/lib/kubelet/" + strings.Repeat("n", 255),
	} {
		if err := r.Check(ok); err != nil {
			t.Errorf("Check(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "/", "/var/lib/kubelet", "relative/path", "some/path", "./x",
		"/etc", "/proc/sys", "/var/lib/kubeletX/y", "/var/lib",
		"/var/lib/kubelet/../../../etc", "/var/lib/kubelet/x/..", "/var/lib/kubelet/./x",
		"/var/lib/kubelet//x", "/var/lib/kubelet/x/",
		"/var/lib/kubelet/x\ny", "/var/lib/kubelet/x\x00", "/var/lib/kubelet/x\x7f", "/var/lib/kubelet/\tx",
		"/var/lib/kubelet/" + strings.Repeat("n", 256),
		"/var/lib/kubelet/" + strings.Repeat("a/", 2040),
	} {
		if err := r.Check(bad); !errors.Is(err, volume.ErrInvalidPath) {
			t.Errorf("Check(%q) = %v, want volume.ErrInvalidPath", bad, err)
		}
	}
}

// TestResolve on a real tree: a symlink as the path or on the way out of
// the root is refused; a root that is itself a symlink works by both names.
func TestResolve(t *testing.T) {
	base := t.TempDir()
	realRoot := filepath.Join(base, "real")
	link := filepath.Join(base, "link") // the configured root: a symlink
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(realRoot, "in"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		link:                                  realRoot,
		filepath.Join(realRoot, "escape"):     outside,
		filepath.Join(realRoot, "leaf"):       filepath.Join(realRoot, "in"),
		filepath.Join(realRoot, "in", "back"): filepath.Join(realRoot, "in"),
	} {
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	r := mustRoot(t, link)
	for path, wantExists := range map[string]bool{
		link + "/in":          true,
		link + "/new":         false,
		realRoot + "/in":      true, // the root's real name
		realRoot + "/in/x":    false,
		link + "/in/back/new": false, // a symlink inside the root, to inside it
	} {
		if err := r.Check(path); err != nil {
			t.Errorf("Check(%q) = %v", path, err)
			continue
		}
		exists, err := r.Resolve(path)
		if err != nil || exists != wantExists {
			t.Errorf("Resolve(%q) = %v, %v; want %v, nil", path, exists, err, wantExists)
		}
	}
	for _, bad := range []string{link + "/leaf", link + "/escape/x", link + "/escape/new"} {
		if _, err := r.Resolve(bad); !errors.Is(err, volume.ErrInvalidPath) {
			t.Errorf("Resolve(%q) = %v, want volume.ErrInvalidPath", bad, err)
		}
	}
	if _, err := r.Resolve(link + "/missing/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing parent: %v, want fs.ErrNotExist", err)
	}
}

// FuzzCheck: any accepted path is absolute, clean, free of control
// characters and "..", within Linux's limits and strictly inside the root,
// and reads back whole from the kernel's mount tables (strings.Fields, as
// mount-utils splits the lines of /proc/mounts, leaves it as the kernel's
// escaping made it); anything else is volume.ErrInvalidPath.
func FuzzCheck(f *testing.F) {
	const root = "/var/lib/kubelet"
	for _, s := range []string{root + "/x", root, "/", "/etc", root + "/../etc", root + "/x\n", "some/path", root + "X/y", root + "//x",
		root + "/a\u00a0b", root + "/a\u2028b", root + "/a\u0085b", root + "/a b", root + "/ü"} {
		f.Add(s)
	}
	r := mustRoot(f, root)
	f.Fuzz(func(t *testing.T, s string) {
		err := r.Check(s)
		if err != nil {
			if !errors.Is(err, volume.ErrInvalidPath) {
				t.Fatalf("Check(%q) = %v, not volume.ErrInvalidPath", s, err)
			}
			return
		}
		if !strings.HasPrefix(s, root+"/") || filepath.Clean(s) != s || len(s) > maxPathLen ||
			strings.IndexFunc(s, isControl) >= 0 || strings.Contains("/"+s+"/", "/../") {
			t.Fatalf("Check accepted %q", s)
		}
		if escaped := strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\134`), " ", `\040`); len(strings.Fields(escaped)) != 1 {
			t.Fatalf("Check accepted %q, which mount-utils' reader splits: %q", s, strings.Fields(escaped))
		}
	})
}
