package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The nodes' image archives: a release's (Carve's is required) and those a
// refs file names. The upstream suite's images come with a refs file and
// no release, and need none: asking for a release there failed the whole
// suite before its first spec (found by make e2e FULL=1).
func TestImageArchives(t *testing.T) {
	release, pods, upstream := t.TempDir(), t.TempDir(), t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(release, "images"), 0o755))
	must(os.WriteFile(filepath.Join(release, "images", "carve.tar"), nil, 0o644))
	must(os.WriteFile(filepath.Join(pods, "refs"), []byte("busybox docker.io/library/busybox:1\n"), 0o644))
	must(os.WriteFile(filepath.Join(upstream, "refs"), []byte("agnhost registry.k8s.io/e2e-test-images/agnhost:2\n"), 0o644))

	got, err := imageArchives(release, pods)
	must(err)
	want := map[string]string{"carve": filepath.Join(release, "images", "carve.tar"), "busybox": filepath.Join(pods, "busybox.tar")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("imageArchives = %v, want %v", got, want)
	}
	if _, err := imageArchives(t.TempDir(), pods); err == nil {
		t.Error("a release without Carve's image was taken")
	}
	up := map[string]string{}
	must(refArchives(up, upstream))
	if want := map[string]string{"agnhost": filepath.Join(upstream, "agnhost.tar")}; !reflect.DeepEqual(up, want) {
		t.Errorf("refArchives = %v, want %v", up, want)
	}
	must(os.WriteFile(filepath.Join(upstream, "refs"), []byte("no-ref-here\n"), 0o644))
	if err := refArchives(map[string]string{}, upstream); err == nil {
		t.Error("a refs line with no reference was taken")
	}
}
