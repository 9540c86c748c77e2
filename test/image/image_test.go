//go:build image

// Package image checks Carve's image as `make image` builds it (an OCI
// archive from the Dockerfile): what it runs, what it has installed and
// what it must not carry. `make image` runs it on the archive it built.
package image

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// archive is the image under test, read once for all tests.
var archive = sync.OnceValues(func() (*image, error) {
	p := os.Getenv("CARVE_IMAGE_ARCHIVE")
	if p == "" {
		return nil, fmt.Errorf("CARVE_IMAGE_ARCHIVE is not set: run through make image")
	}
	img, err := readArchive(p)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	img.archiveSize = st.Size()
	return img, nil
})

func load(t *testing.T) *image {
	t.Helper()
	img, err := archive()
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestSize records the image's size (no limit: TestSlim and TestPackages
// say what must not be in it).
func TestSize(t *testing.T) {
	img := load(t)
	t.Logf("%s: %d files, %.1f MiB unpacked, %.1f MiB archive", img.ref, len(img.files),
		float64(img.size())/(1<<20), float64(img.archiveSize)/(1<<20))
	if img.size() == 0 {
		t.Error("empty image")
	}
}

// packages lists the installed packages of dpkg's status file.
func packages(status []byte) map[string]bool {
	pkgs := map[string]bool{}
	var name string
	sc := bufio.NewScanner(bytes.NewReader(status))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "Package: "); ok {
			name = v
		}
		if v, ok := strings.CutPrefix(line, "Status: "); ok && strings.HasSuffix(v, " installed") {
			pkgs[name] = true
		}
	}
	return pkgs
}

func TestEntrypoint(t *testing.T) {
	img := load(t)
	if want := []string{"/usr/local/bin/carve"}; !slices.Equal(img.config.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", img.config.Config.Entrypoint, want)
	}
	f := img.files["usr/local/bin/carve"]
	if f == nil || f.mode&0o111 == 0 {
		t.Fatalf("usr/local/bin/carve missing or not executable: %+v", f)
	}
}

// TestPackages: the node's tools are installed, and nothing that builds
// software is.
func TestPackages(t *testing.T) {
	img := load(t)
	st := img.files["var/lib/dpkg/status"]
	if st == nil {
		t.Fatal("no dpkg status file")
	}
	pkgs := packages(st.data)
	t.Logf("%d packages installed", len(pkgs))
	for _, p := range []string{"lvm2", "thin-provisioning-tools", "e2fsprogs", "xfsprogs", "btrfs-progs", "util-linux", "mount", "cryptsetup-bin", "kmod"} {
		if !pkgs[p] {
			t.Errorf("package %s is not installed", p)
		}
	}
	// gcc-12-base (libgcc's docs and copyright) is in every Debian image.
	build := regexp.MustCompile(`^(gcc|g\+\+|cpp|clang|golang|golang-go|golang-[0-9.]+-go|binutils|make|libc6-dev|linux-libc-dev|dpkg-dev|build-essential)(-[0-9.]+)?$`)
	for p := range pkgs {
		if build.MatchString(p) {
			t.Errorf("build tool package %s is installed", p)
		}
	}
	for _, f := range []string{"usr/local/go/bin/go", "usr/bin/gcc", "usr/bin/cc", "usr/bin/ld"} {
		if img.files[f] != nil {
			t.Errorf("%s is in the image", f)
		}
	}
}

// TestSlim: no apt lists or caches, docs (but copyrights), man pages or
// locales. Links are not content: Debian links some packages' doc folders
// to others'.
func TestSlim(t *testing.T) {
	img := load(t)
	bad := map[string][]string{}
	for name, f := range img.files {
		if f.link != "" {
			continue
		}
		switch {
		case strings.HasPrefix(name, "var/lib/apt/lists/") && !strings.HasSuffix(name, "/lock"):
			bad["apt lists"] = append(bad["apt lists"], name)
		case strings.HasPrefix(name, "var/cache/apt/"):
			bad["apt caches and downloaded packages"] = append(bad["apt caches and downloaded packages"], name)
		case strings.HasPrefix(name, "usr/share/doc/") && !strings.HasSuffix(name, "/copyright"):
			bad["docs"] = append(bad["docs"], name)
		// info/dir is install-info's index, not a page.
		case strings.HasPrefix(name, "usr/share/man/"),
			strings.HasPrefix(name, "usr/share/info/") && name != "usr/share/info/dir":
			bad["man and info pages"] = append(bad["man and info pages"], name)
		case strings.HasPrefix(name, "usr/share/locale/") && name != "usr/share/locale/locale.alias":
			bad["locales"] = append(bad["locales"], name)
		}
	}
	for what, names := range bad {
		slices.Sort(names)
		t.Errorf("%d files of %s in the image, e.g. %q", len(names), what, names[:min(len(names), 5)])
	}
}

// TestNoBuildHostState: nothing of the machine that built the image: no
// LVM metadata backup or archive (lvm2's postinst scans the build
// machine's disks and backed up a VG it found there), no ldconfig
// aux-cache (inode times). Either also made two builds differ.
func TestNoBuildHostState(t *testing.T) {
	img := load(t)
	var bad []string
	for name := range img.files {
		if strings.HasPrefix(name, "etc/lvm/backup/") || strings.HasPrefix(name, "etc/lvm/archive/") ||
			name == "var/cache/ldconfig/aux-cache" {
			bad = append(bad, name)
		}
	}
	slices.Sort(bad)
	if len(bad) > 0 {
		t.Errorf("the build machine's state in the image: %q", bad)
	}
}

// TestLVMWithoutUdev: the image's lvm.conf lets lvm2 make device nodes
// itself (no udev in a container).
func TestLVMWithoutUdev(t *testing.T) {
	img := load(t)
	f := img.files["etc/lvm/lvm.conf"]
	if f == nil {
		t.Fatal("no etc/lvm/lvm.conf")
	}
	for _, want := range []string{`(?m)^\s*udev_sync = 0`, `(?m)^\s*udev_rules = 0`} {
		if !regexp.MustCompile(want).Match(f.data) {
			t.Errorf("lvm.conf lacks %s", want)
		}
	}
}
