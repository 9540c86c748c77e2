//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

// TestProductionProfileInEffect runs only in the VM's production profile
// (make test-vm-production) and proves that the suite really ran there,
// and that Carve works with the host's udev, dmeventd and devices file
// rather than around them:
//   - udevd answers on its control socket and dmeventd runs;
//   - the VG's PVs are in lvm2's devices file (vgcreate listed them, as on
//     RHEL 9);
//   - a volume Carve activates gets udev's links (/dev/disk/by-id/dm-uuid-
//     LVM-...), so udev processed Carve's device-mapper events;
//   - a thin volume's pool is monitored by dmeventd, the autoextend
//     policy's precondition.
func TestProductionProfileInEffect(t *testing.T) {
	if !testenv.ProductionProfile() {
		t.Skip("the production profile's own checks: make test-vm-production")
	}
	if _, err := os.Stat("/run/udev/control"); err != nil {
		t.Fatalf("udevd is not running: %v", err)
	}
	if !processRuns(t, "dmeventd") {
		t.Fatal("dmeventd is not running")
	}
	e := setup(t)
	devices, err := os.ReadFile("/etc/lvm/devices/system.devices")
	if err != nil {
		t.Fatalf("lvm2's devices file: %v", err)
	}
	for _, d := range e.disks {
		if !bytes.Contains(devices, []byte("DEVNAME="+d+" ")) {
			t.Errorf("%s is not in the devices file:\n%s", d, devices)
		}
	}
	e.addPool(128 << 20)
	ctx := context.Background()
	for kind, params := range map[string]map[string]string{"thick": nil, "thin": {"thinPool": pool}} {
		v, err := e.c.Create(ctx, "pvc-profile-"+kind, 16*mib, params, csiflow.BlockCap(snw))
		must(t, err)
		target := e.path("profile-target")
		must(t, v.Up(ctx, node, e.path("profile-staging"), target))
		lv, ok := e.lv(v)
		if !ok {
			t.Fatalf("LV of %s missing", v.ID)
		}
		links, _ := filepath.Glob("/dev/disk/by-id/dm-uuid-LVM-*")
		if !linkTo(t, links, filepath.Join("/dev", vg, lv.Name)) {
			t.Errorf("no udev link in /dev/disk/by-id points to %s's device (links: %v): udev did not see Carve's activation", lv.Name, links)
		}
		must(t, v.Down(ctx, target))
		must(t, v.Delete(ctx))
	}
	mon, err := exec.CommandContext(ctx, "lvs", "--noheadings", "-o", "seg_monitor", vg+"/"+pool).Output()
	if err != nil {
		t.Fatalf("lvs seg_monitor: %v", err)
	}
	if got := strings.TrimSpace(string(mon)); got != "monitored" {
		t.Errorf("thin pool %s/%s is %q, want monitored by dmeventd", vg, pool, got)
	}
}

// processRuns reports whether a process of that command name runs.
func processRuns(t *testing.T, comm string) bool {
	t.Helper()
	comms, err := filepath.Glob("/proc/[0-9]*/comm")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range comms {
		if b, err := os.ReadFile(c); err == nil && strings.TrimSpace(string(b)) == comm {
			return true
		}
	}
	return false
}

// linkTo reports whether one of links resolves to the device dev resolves
// to.
func linkTo(t *testing.T, links []string, dev string) bool {
	t.Helper()
	want, err := filepath.EvalSymlinks(dev)
	if err != nil {
		t.Fatalf("%s: %v", dev, err)
	}
	for _, l := range links {
		if got, err := filepath.EvalSymlinks(l); err == nil && got == want {
			return true
		}
	}
	return false
}
