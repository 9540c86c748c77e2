//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/lvm"
	"carve.dev/carve/test/csiflow"
)

// TestRAIDAndStripes carves raid1 and striped volumes over the VG's two
// PVs: data round-trips, capacity counts what they really take, a layout
// that needs more PVs than there are is refused before lvcreate, and both
// grow.
func TestRAIDAndStripes(t *testing.T) {
	secondDisk(t, "raid1 and stripes need two PVs")
	e := setup(t)
	ctx := context.Background()

	capy, err := e.c.Controller.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: map[string]string{"mirrors": "1"}})
	must(t, err)
	plain, err := e.c.Controller.GetCapacity(ctx, &csi.GetCapacityRequest{})
	must(t, err)
	if max := capy.GetMaximumVolumeSize().GetValue(); max <= 0 || max > plain.GetAvailableCapacity()/2 {
		t.Fatalf("raid1 maximum volume %d with %d free: want at most half", max, plain.GetAvailableCapacity())
	}

	for _, tc := range []struct {
		name   string
		params map[string]string
		layout string
	}{
		{"raid1", map[string]string{"mirrors": "1"}, "raid1"},
		{"striped", map[string]string{"stripes": "2", "stripeSize": "64Ki"}, "striped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			v, err := e.c.Create(ctx, "pvc-"+tc.name, 64*mib, tc.params, csiflow.MountCap(snw, ""))
			must(t, err)
			lv, _ := e.lv(v)
			if !strings.Contains(lv.Layout, tc.layout) {
				t.Fatalf("LV layout %q, want %s", lv.Layout, tc.layout)
			}
			target := e.path(tc.name)
			must(t, v.Up(ctx, node, e.path(tc.name+"-staging"), target))
			data := randomBytes(t, 4*mib)
			writeSynced(t, filepath.Join(target, "data"), data)
			_, err = e.c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
				VolumeId: v.ID, CapacityRange: &csi.CapacityRange{RequiredBytes: 128 * mib}, VolumeCapability: v.Cap})
			must(t, err)
			_, err = e.c.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: v.ID, VolumePath: target, VolumeCapability: v.Cap})
			must(t, err)
			if total := e.fsTotal(v, target); total < 110*mib {
				t.Fatalf("%s filesystem %d bytes after growing to 128 MiB", tc.name, total)
			}
			if got := readPrefix(t, filepath.Join(target, "data"), len(data)); !bytes.Equal(got, data) {
				t.Fatal("data changed")
			}
			must(t, v.Down(ctx, target))
			must(t, v.Delete(ctx))
		})
	}
	e.t = t
	_, err = e.c.Create(ctx, "pvc-3legs", 16*mib, map[string]string{"mirrors": "2"}, csiflow.MountCap(snw, ""))
	wantCode(t, "raid1 with 3 legs on 2 PVs", err, codes.ResourceExhausted)
	if lvs, _ := e.lvm.ListLVs(ctx, vg); len(lvs) != 0 {
		t.Fatalf("refused create left LVs: %v", lvs)
	}
}

// TestCutShortRAIDCreateIsCarvedAgain: an lvcreate of a raid1 volume
// killed while lvm2 wiped its metadata LVs leaves the LV pending with its
// parts visible (and the metadata LVs maybe active), and lvm2 refuses to
// activate it ever after. The retry of the CreateVolume must remove it and
// carve the volume again, not adopt it: adopted, it was a volume no node
// could publish (found by the soak, seed 1796066915745628864). The state
// is made as the kill leaves it: the pending tag back on, the LV marked
// activation-skip and its parts made visible in the VG's metadata, the
// metadata LVs activated.
func TestCutShortRAIDCreateIsCarvedAgain(t *testing.T) {
	secondDisk(t, "raid1 needs two PVs")
	e := setup(t)
	ctx := context.Background()
	params := map[string]string{"mirrors": "1"}
	v, err := e.c.Create(ctx, "pvc-cut", 16*mib, params, csiflow.MountCap(snw, ""))
	must(t, err)
	lv, _ := e.lv(v)
	first := lv.UUID
	// lvm2 marks the LV activation-skip while its parts are visible: its
	// metadata checks refuse visible parts otherwise.
	lvmRun(t, "lvchange", "--addtag", "carve.dev/pending", "--setactivationskip", "y", vg+"/"+lv.Name)
	showRAIDParts(t, lv.Name)
	for _, meta := range []string{lv.Name + "_rmeta_0", lv.Name + "_rmeta_1"} {
		lvmRun(t, "lvchange", "-ay", vg+"/"+meta)
	}
	if err := exec.Command("lvm", "lvchange", "-ay", "-K", vg+"/"+lv.Name).Run(); err == nil {
		t.Fatal("lvm2 activated a raid LV with visible parts: the state is not the one the kill leaves")
	}

	again, err := e.c.Create(ctx, "pvc-cut", 16*mib, params, csiflow.MountCap(snw, ""))
	must(t, err)
	if again.ID != v.ID {
		t.Fatalf("retry answered %s, want %s", again.ID, v.ID)
	}
	lv, _ = e.lv(again)
	if lv.UUID == first || slices.Contains(lv.Tags, "carve.dev/pending") {
		t.Fatalf("LV %s (uuid %s, tags %v) was adopted, not carved again", lv.Name, lv.UUID, lv.Tags)
	}
	all, err := e.lvm.ListAllLVs(ctx, vg)
	must(t, err)
	if parts := lvm.VisibleRAIDParts(all, lv.Name); len(parts) > 0 {
		t.Fatalf("parts %v still visible", parts)
	}
	if out, err := exec.Command("dmsetup", "ls").CombinedOutput(); err != nil || strings.Contains(string(out), vg+"-pvc--cut") {
		t.Fatalf("devices of the removed LV's parts left behind (%v):\n%s", err, out)
	}
	target := e.path("cut")
	must(t, again.Up(ctx, node, e.path("cut-staging"), target))
	data := randomBytes(t, mib)
	writeSynced(t, filepath.Join(target, "data"), data)
	if got := readPrefix(t, filepath.Join(target, "data"), len(data)); !bytes.Equal(got, data) {
		t.Fatal("data changed")
	}
	must(t, again.Down(ctx, target))
	must(t, again.Delete(ctx))
}

// showRAIDParts makes the raid parts of LV name visible in the VG's
// metadata (vgcfgbackup, the VISIBLE flag added, vgcfgrestore), as lvm2's
// raid wipe does before it is killed.
func showRAIDParts(t *testing.T, name string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "vg.cfg")
	lvmRun(t, "vgcfgbackup", "-f", file, vg)
	text, err := os.ReadFile(file)
	must(t, err)
	part := regexp.MustCompile(`(?m)^(\s*` + regexp.QuoteMeta(name) + `_r(?:meta|image)_[0-9]+ \{\s*id = "[^"]*"\s*status = \[)([^\]]*)\]`)
	shown := part.ReplaceAll(text, []byte(`${1}${2}, "VISIBLE"]`))
	if n := len(part.FindAll(text, -1)); n != 4 {
		t.Fatalf("%d raid parts of %s in the metadata, want 4:\n%s", n, name, text)
	}
	must(t, os.WriteFile(file, shown, 0o600))
	lvmRun(t, "vgcfgrestore", "-f", file, vg)
}

func lvmRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("lvm", args...).CombinedOutput(); err != nil {
		t.Fatalf("lvm %s: %v: %s", strings.Join(args, " "), err, out)
	}
}
