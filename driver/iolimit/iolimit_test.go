package iolimit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"carve.dev/carve/driver/volume"
)

const uid = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"

// tree makes directories under a temporary root and returns it.
func tree(t *testing.T, dirs ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// PodDir finds the pod under both of kubelet's drivers and every QoS
// class, and nothing else: a pod directory outside kubepods, another
// pod's, a name that only contains the UID.
func TestPodDir(t *testing.T) {
	sysd := "pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice"
	for _, c := range []struct{ name, dir string }{
		{"cgroupfs guaranteed", "kubepods/pod" + uid},
		{"cgroupfs burstable", "kubepods/burstable/pod" + uid},
		{"cgroupfs besteffort", "kubepods/besteffort/pod" + uid},
		{"systemd guaranteed", "kubepods.slice/kubepods-" + sysd},
		{"systemd burstable", "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-" + sysd},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := tree(t, c.dir, "kubepods/burstable/pod11111111-2222-3333-4444-555555555555/c1", "system.slice/pod"+uid)
			got, err := Cgroups{Root: root}.PodDir(uid)
			if err != nil || got != filepath.Join(root, c.dir) {
				t.Errorf("PodDir = %q, %v; want %s", got, err, c.dir)
			}
		})
	}
	root := tree(t, "system.slice/pod"+uid, "kubepods/burstable/xpod"+uid, "kubepods/burstable/pod"+uid+"x",
		"kubepods/burstable/pod11111111-2222-3333-4444-555555555555/pod"+uid)
	if got, err := (Cgroups{Root: root}).PodDir(uid); !errors.Is(err, ErrNoPodCgroup) {
		t.Errorf("PodDir with no such pod = %q, %v; want ErrNoPodCgroup", got, err)
	}
	for _, bad := range []string{"", "../../etc", uid + "/..", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "pod" + uid} {
		if _, err := (Cgroups{Root: root}).PodDir(bad); !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("PodDir(%q): %v, want ErrInvalidArgument", bad, err)
		}
	}
	if _, err := (Cgroups{Root: filepath.Join(root, "none")}).PodDir(uid); err == nil || errors.Is(err, ErrNoPodCgroup) {
		t.Errorf("PodDir under a missing root: %v, want the root's error", err)
	}
}

// Set writes io.max's line, max for each limit that is 0; Read reads the
// device's limits back out of what the kernel shows (every device's line).
func TestSetAndRead(t *testing.T) {
	dir := t.TempDir()
	rdev := unix.Mkdev(253, 7)
	if err := Set(dir, rdev, volume.IOLimits{WriteBPS: 1 << 20, ReadIOPS: 300}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Set without io.max: %v, want a not-exist error (io controller off)", err)
	}
	p := filepath.Join(dir, "io.max")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Set(dir, rdev, volume.IOLimits{WriteBPS: 1 << 20, ReadIOPS: 300}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if want := "253:7 rbps=max wbps=1048576 riops=300 wiops=max"; string(b) != want {
		t.Errorf("io.max got %q, want %q", b, want)
	}
	shown := "8:0 rbps=100 wbps=max riops=max wiops=max\n253:7 rbps=max wbps=1048576 riops=300 wiops=max\n"
	if err := os.WriteFile(p, []byte(shown), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Read(dir, rdev)
	if err != nil || l != (volume.IOLimits{WriteBPS: 1 << 20, ReadIOPS: 300}) {
		t.Errorf("Read = %+v, %v", l, err)
	}
	if l, err := Read(dir, unix.Mkdev(253, 8)); err != nil || !l.IsZero() {
		t.Errorf("Read of a device without a line = %+v, %v; want no limits", l, err)
	}
	for _, bad := range []string{"253:7 rbps", "253:7 rbps=-1", "253:7 wbps=1e6"} {
		if _, err := parseIOMax(bad, rdev); err == nil {
			t.Errorf("parseIOMax(%q): no error", bad)
		}
	}
}

// PodOfTarget reads the pod out of kubelet's two target path shapes, and
// out of nothing else.
func TestPodOfTarget(t *testing.T) {
	const root = "/var/lib/kubelet"
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{root + "/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-1/mount", true},
		{root + "/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-1/" + uid, true},
		{root + "/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-1/mount/x", false},
		{root + "/pods/" + uid + "/volumes/kubernetes.io~empty-dir/pvc-1/mount", false},
		{root + "/pods/not-a-uid/volumes/kubernetes.io~csi/pvc-1/mount", false},
		{root + "/plugins/kubernetes.io/csi/staging/pvc-1/" + uid, false},
		{"/elsewhere/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-1/mount", false},
		{root + "/../kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-1/mount", true}, // Rel cleans; nodepath refuses such paths first
		{root, false},
	} {
		got, ok := PodOfTarget(root, c.path)
		if ok != c.ok || ok && got != uid {
			t.Errorf("PodOfTarget(%q) = %q, %v; want ok=%v", c.path, got, ok, c.ok)
		}
	}
}

// FuzzPodOfTarget: whatever the path, a pod it yields is a valid UID that
// the path holds as a whole component.
func FuzzPodOfTarget(f *testing.F) {
	f.Add("/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-1/mount")
	f.Add("/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-1/" + uid)
	f.Add("/var/lib/kubelet/pods/../../../etc/volumes/kubernetes.io~csi/x/mount")
	f.Fuzz(func(t *testing.T, path string) {
		got, ok := PodOfTarget("/var/lib/kubelet", path)
		if !ok {
			return
		}
		if !ValidUID(got) {
			t.Fatalf("PodOfTarget(%q) = %q, not a UID", path, got)
		}
		if !hasComponent(filepath.Clean(path), got) {
			t.Fatalf("PodOfTarget(%q) = %q, not a component of the path", path, got)
		}
	})
}

// hasComponent tells whether name is one of path's components.
func hasComponent(path, name string) bool {
	for dir := path; dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		if filepath.Base(dir) == name {
			return true
		}
	}
	return false
}
