package lvm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
	if strings.Contains(conf, "/etc/lvm") {
		t.Error("lvm.conf points at /etc/lvm")
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
