package lvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"carve.dev/carve/lvm/runner"
	"carve.dev/carve/test/loopdev"
)

func TestWritePrivateConfig(t *testing.T) {
	dir := t.TempDir()
	env, err := WritePrivateConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"LVM_SYSTEM_DIR=" + dir, "DM_DISABLE_UDEV=1"}
	for _, w := range want {
		if !strings.Contains(strings.Join(env, "\n"), w) {
			t.Errorf("env %v lacks %s", env, w)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "lvm.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for _, w := range []string{
		"udev_sync = 0", "udev_rules = 0", "obtain_device_list_from_udev = 0", "monitoring = 0",
		`locking_dir = "` + dir + `/lock"`, `backup_dir = "` + dir + `/backup"`, `archive_dir = "` + dir + `/archive"`,
	} {
		if !strings.Contains(conf, w) {
			t.Errorf("lvm.conf lacks %q", w)
		}
	}
	// lvm2 writes nothing of its own under /etc/lvm; it reads lvm2's
	// installed command profiles there (the lvm2 shells' one).
	if strings.Count(conf, "/etc/lvm") != 1 || !strings.Contains(conf, `profile_dir = "/etc/lvm/profile"`) {
		t.Error("lvm.conf points at /etc/lvm for more than its command profiles")
	}
	for _, sub := range []string{"lock", "backup", "archive"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			t.Errorf("%s not created: %v", sub, err)
		}
	}
}

// lvm2 itself must accept the file (skipped where lvm2 is not installed).
func TestPrivateConfigValidates(t *testing.T) {
	if _, err := exec.LookPath("lvm"); err != nil {
		t.Skip("lvm2 not installed")
	}
	dir := t.TempDir()
	env, err := WritePrivateConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("lvm", "config", "--validate")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "LVM configuration valid") {
		t.Errorf("lvm config --validate: %v\n%s", err, out)
	}
}

func TestWritePrivateConfigRefusesBadDirs(t *testing.T) {
	for _, dir := range []string{"relative/dir", "/tmp/a\"b"} {
		if _, err := WritePrivateConfig(dir); err == nil {
			t.Errorf("WritePrivateConfig(%q) succeeded", dir)
		}
	}
}

func TestWritePrivateConfigFilter(t *testing.T) {
	dir := t.TempDir()
	if _, err := WritePrivateConfig(dir, "/dev/loop3", "/dev/mapper/vg-lv_1"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "lvm.conf"))
	if err != nil {
		t.Fatal(err)
	}
	want := `global_filter = [ "a|^/dev/loop3$|", "a|^/dev/mapper/vg-lv_1$|", "r|.*|" ]`
	if !strings.Contains(string(b), want) {
		t.Errorf("lvm.conf lacks %s:\n%s", want, b)
	}
	for _, bad := range []string{"loop3", "/dev/loop.*", "/dev/a|b", `/dev/a"b`, "/dev/", "/etc/passwd", "/dev/../etc/x", "/dev/a b"} {
		sub := t.TempDir()
		if _, err := WritePrivateConfig(sub, bad); err == nil {
			t.Errorf("WritePrivateConfig with device %q succeeded", bad)
		}
		if _, err := os.Stat(filepath.Join(sub, "lvm.conf")); err == nil {
			t.Errorf("device %q refused, but lvm.conf was written", bad)
		}
	}
}

// Two VGs of one name, each on its own loop device, each seen through a
// config filtered to its device: neither sees the other. This is the e2e
// host node's case, where another run's loop device with a VG "e2e" left
// attached made its vgcreate fail. Needs root, losetup and lvm2 (pvcreate
// and vgcreate need no device-mapper).
func TestPrivateConfigSeesOnlyItsDevices(t *testing.T) {
	requireHostLVM(t)
	a, b := hostLoop(t), hostLoop(t)
	envA, envB := filteredEnv(t, a), filteredEnv(t, b)
	unfiltered := filteredEnv(t)
	for _, c := range []struct {
		dev string
		env []string
	}{{a, envA}, {b, envB}} {
		lvmCmd(t, c.env, "pvcreate", "-q", c.dev)
		lvmCmd(t, c.env, "vgcreate", "-q", "carve-twin", c.dev)
		t.Cleanup(func() { _ = runLVM(c.env, "vgremove", "-q", "-f", "carve-twin") })
	}
	if got := lvmCmd(t, envA, "pvs", "--noheadings", "-o", "pv_name", "-S", "vg_name=carve-twin"); strings.TrimSpace(got) != a {
		t.Errorf("filtered to %s, pvs shows %q", a, got)
	}
	if got := lvmCmd(t, envB, "pvs", "--noheadings", "-o", "pv_name", "-S", "vg_name=carve-twin"); strings.TrimSpace(got) != b {
		t.Errorf("filtered to %s, pvs shows %q", b, got)
	}
	// Without the filter both are there: the test is not vacuous.
	got, _ := runLVMOut(unfiltered, "pvs", "--noheadings", "-o", "pv_name")
	if !strings.Contains(got, a) || !strings.Contains(got, b) {
		t.Errorf("unfiltered pvs does not show both %s and %s: %q", a, b, got)
	}
}

// requireHostLVM skips a test of lvm2 on this machine's own loop devices
// where lvm2 is not installed (loopdev.New skips where loop devices
// cannot be had).
func requireHostLVM(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("lvm"); err != nil {
		t.Skip("skipping: lvm2 not installed")
	}
}

// hostLoop is a loop device of 64 MiB for this test (loopdev.New).
func hostLoop(t *testing.T) string {
	t.Helper()
	dev, _ := loopdev.New(t, 64<<20)
	return dev
}

func filteredEnv(t *testing.T, only ...string) []string {
	t.Helper()
	env, err := WritePrivateConfig(t.TempDir(), only...)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func lvmCmd(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, err := runLVMOut(env, args...)
	if err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return out
}

func runLVM(env []string, args ...string) error { _, err := runLVMOut(env, args...); return err }

func runLVMOut(env []string, args ...string) (string, error) {
	cmd := exec.Command("lvm", args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A VG whose metadata area is full refuses new LVs and new tags with data
// space to spare: the client says so as ErrMetadataFull (a kind of
// ErrNoSpace, so RESOURCE_EXHAUSTED), and reports how much of the area is
// left. Real lvm2 on a loop device: lvcreate needs no device-mapper with
// activation off, lvchange --addtag on an inactive LV none at all. The
// area here is lvm2's default and smallest (1 MiB, half of it for a new
// version of the metadata), which 1066 LVs with Carve's tags filled.
func TestMetadataFullIsNoSpace(t *testing.T) {
	c := hostVGWithLV(t, "carve-mdfull")
	ctx := context.Background()
	// Long tags fill the area in a few commands where LVs would take a
	// thousand: 100 tags of 1000 characters a command.
	var err error
	made := 0
	for ; made < 20 && err == nil; made++ {
		var tags []string
		for i := range 100 {
			tags = append(tags, fmt.Sprintf("fill-%02d-%03d-%s", made, i, strings.Repeat("x", 990)))
		}
		err = c.ChangeTags(ctx, "carve-mdfull", "lv0", tags, nil)
	}
	if err == nil {
		t.Fatalf("%d commands of 100 KB of tags and the metadata area never filled", made)
	}
	if !errors.Is(err, ErrMetadataFull) || !errors.Is(err, ErrNoSpace) {
		t.Fatalf("lvchange --addtag on a full metadata area: %v, want ErrMetadataFull and ErrNoSpace", err)
	}
	args := []string{"lvcreate", "--config", "global{activation=0}", "-q", "-an", "-Zn", "-y", "-l", "1", "-n", "lv1"}
	for i := range 30 { // more than the last command's 100 KB can have left
		args = append(args, "--addtag", fmt.Sprintf("new-%02d-%s", i, strings.Repeat("y", 990)))
	}
	_, err = c.run(ctx, append(args, "carve-mdfull")...)
	if !errors.Is(err, ErrMetadataFull) {
		t.Errorf("lvcreate on a full metadata area: %v, want ErrMetadataFull", err)
	}
	vg, err := c.GetVG(ctx, "carve-mdfull")
	if err != nil {
		t.Fatal(err)
	}
	if vg.MetadataSize == 0 || vg.MetadataFree >= 100_000 || vg.Free < 2*vg.ExtentSize {
		t.Errorf("after %d commands: metadata %d of %d free, data %d free: want a full area and data to spare",
			made, vg.MetadataFree, vg.MetadataSize, vg.Free)
	}
	t.Logf("%d commands of tags filled a %d-byte metadata area (%d bytes left); %d bytes of data space free", made, vg.MetadataSize, vg.MetadataFree, vg.Free)
}

// lvm2 given --deltag and --addtag of one tag drops it, in either order;
// ChangeTags keeps a tag that is in both of its lists. Real lvm2 on a loop
// device (tags change no device-mapper state).
func TestChangeTagsKeepsATagBothAddedAndRemoved(t *testing.T) {
	c := hostVGWithLV(t, "carve-tags", "keep", "old")
	ctx := context.Background()
	if err := c.ChangeTags(ctx, "carve-tags", "lv0", []string{"keep", "new"}, []string{"keep", "old"}); err != nil {
		t.Fatal(err)
	}
	lv, err := c.GetLV(ctx, "carve-tags", "lv0")
	if err != nil {
		t.Fatal(err)
	}
	if !lv.HasTag("keep") || !lv.HasTag("new") || lv.HasTag("old") {
		t.Errorf("tags %v, want keep and new", lv.Tags)
	}
}

// hostVGWithLV makes VG vg on a loop device of this machine, with LV lv0
// of one extent carrying tags, made without device-mapper (activation
// off, not zeroed), and returns a client of the VG's private config.
func hostVGWithLV(t *testing.T, vg string, tags ...string) *Client {
	t.Helper()
	requireHostLVM(t)
	dev := hostLoop(t)
	env := filteredEnv(t, dev)
	lvmCmd(t, env, "pvcreate", "-q", dev)
	lvmCmd(t, env, "vgcreate", "-q", "-s", "1m", vg, dev)
	t.Cleanup(func() { _ = runLVM(env, "vgremove", "-q", "-f", "--config", "global{activation=0}", vg) })
	args := []string{"lvcreate", "--config", "global{activation=0}", "-q", "-an", "-Zn", "-y", "-l", "1", "-n", "lv0"}
	for _, tag := range tags {
		args = append(args, "--addtag", tag)
	}
	c := New(runner.New(time.Minute, env...))
	if _, err := c.run(context.Background(), append(args, vg)...); err != nil {
		t.Fatal(err)
	}
	return c
}
