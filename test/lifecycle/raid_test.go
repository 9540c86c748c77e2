//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

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
