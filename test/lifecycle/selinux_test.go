//go:build vmtest

package lifecycle

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/test/csiflow"
)

// seLinuxLabel is a pod's label as kubelet passes it with seLinuxMount:
// true, categories and all. RHEL's policy labels containers' files
// container_file_t; Debian's default policy, the one the VM loads, has
// no container module, so the type here is one it has: what is tested
// is that the whole label, commas included, reaches the kernel.
const seLinuxLabel = "system_u:object_r:svirt_image_t:s0:c1,c2"

// TestSELinuxMount: kubelet's context= mount option (seLinuxMount: true)
// goes through NodeStage and NodePublish to a real SELinux kernel: the
// filesystem at the staging path and in the pod's bind mount carries
// the pod's label, categories included; a label the policy does not know
// fails the stage with nothing left mounted. It runs in a boot with
// SELinux on (make test-vm-selinux, CARVE_VM_SELINUX=1); other boots
// skip it.
func TestSELinuxMount(t *testing.T) {
	if os.Getenv("CARVE_VM_SELINUX") != "1" {
		t.Skip("needs a kernel booted with SELinux: make test-vm-selinux")
	}
	loadSELinuxPolicy(t)
	e := setup(t)
	ctx := context.Background()

	flag := `context="` + seLinuxLabel + `"`
	v, err := e.c.Create(ctx, "pvc-selinux", 64*mib, map[string]string{"fsType": "ext4"}, csiflow.MountCap(snw, "ext4", flag))
	must(t, err)
	staging, target := e.path("staging"), e.path("target")
	must(t, v.Up(ctx, node, staging, target))
	for _, p := range []string{staging, target} {
		if got := fileLabel(t, p); got != seLinuxLabel {
			t.Errorf("%s is labelled %q, want the pod's %q", p, got, seLinuxLabel)
		}
	}
	// What the pod writes carries the label too (context= labels every
	// file of the mount).
	file := target + "/data"
	must(t, os.WriteFile(file, []byte("x"), 0o600))
	if got := fileLabel(t, file); got != seLinuxLabel {
		t.Errorf("a new file is labelled %q, want %q", got, seLinuxLabel)
	}
	must(t, v.Unpublish(ctx, target))
	must(t, v.Unstage(ctx))

	// A label of a type the policy lacks: the kernel refuses the mount
	// (the volume still attached, so that only the label can be why).
	v.Cap = csiflow.MountCap(snw, "ext4", `context="system_u:object_r:no_such_type_t:s0:c1,c2"`)
	staging = e.path("staging-bad")
	err = v.Stage(ctx, staging)
	if err == nil {
		t.Fatal("a stage with a label unknown to the policy succeeded")
	}
	if !strings.Contains(err.Error(), "no_such_type_t") {
		t.Errorf("the refused stage's error %q does not name the label", err)
	}
	if _, ok := mountAt(t, staging); ok {
		t.Errorf("the refused stage left %s mounted", staging)
	}
	// The mount-flag check refuses an unquoted label with categories
	// before any mount: mount(8) would cut it at the comma.
	v.Cap = csiflow.MountCap(snw, "ext4", "context="+seLinuxLabel)
	wantCode(t, "an unquoted label with categories", v.Stage(ctx, staging), codes.InvalidArgument)
	must(t, v.Detach(ctx))
	must(t, v.Delete(ctx))
}

// loadSELinuxPolicy mounts selinuxfs and loads the host's policy
// (selinux-policy-default), in the permissive mode the boot chose:
// until a policy is loaded the kernel accepts any label unchecked.
func loadSELinuxPolicy(t *testing.T) {
	t.Helper()
	// The kernel makes selinuxfs's mount point when SELinux is on.
	if _, err := os.Stat("/sys/fs/selinux"); err != nil {
		t.Fatalf("no SELinux in this kernel (%v): was the VM booted with --selinux?", err)
	}
	if _, err := os.Stat("/sys/fs/selinux/enforce"); err != nil {
		must(t, unix.Mount("selinuxfs", "/sys/fs/selinux", "selinuxfs", 0, ""))
	}
	if out, err := exec.Command("load_policy").CombinedOutput(); err != nil {
		t.Fatalf("load_policy (apt-get install selinux-policy-default): %v: %s", err, out)
	}
}

// fileLabel reads path's SELinux label.
func fileLabel(t *testing.T, path string) string {
	t.Helper()
	buf := make([]byte, 256)
	n, err := unix.Getxattr(path, "security.selinux", buf)
	must(t, err)
	return strings.TrimRight(string(buf[:n]), "\x00")
}
