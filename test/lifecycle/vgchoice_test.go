//go:build vmtest

package lifecycle

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/test/csiflow"
	"carve.dev/carve/test/testenv"
)

// TestSeveralVGsPerClass serves two real VGs, one per disk, the second
// tagged, and carves through classes that name both (volumeGroups): the
// spread policy puts a volume in the VG with more room, pack in the one
// with less that still fits, a tag names only the VGs carrying it; a
// retried CreateVolume finds its volume where it went even when the
// policy would now pick the other VG; capacity adds both VGs up and
// offers the largest one VG holds; a clone stays in its source's VG; a
// volume too large for either is RESOURCE_EXHAUSTED with nothing carved;
// and a volume in the second VG goes through stage, publish and its data.
func TestSeveralVGsPerClass(t *testing.T) {
	const vg2 = "lifevg2"
	disk2 := secondDisk(t, "two VGs need two disks")
	ctx := context.Background()
	l := testenv.PrivateLVM(t)
	testenv.NewVG(t, l, vg, testenv.Disk(t, "CARVE_TEST_DISK"))
	testenv.NewVG(t, l, vg2, disk2)
	if out, err := exec.Command("vgchange", "--addtag", "fast", vg2).CombinedOutput(); err != nil {
		t.Fatalf("tag %s: %v: %s", vg2, err, out)
	}
	endpoint := testenv.StartCarve(t, testenv.Options{}, "--volume-groups="+vg+","+vg2, "--node-id="+node).Endpoint
	e := &env{t: t, lvm: l, c: dial(t, endpoint), endpoint: endpoint, dir: t.TempDir()}
	both := vg + "," + vg2
	in := func(v *csiflow.Volume) string { return strings.Split(v.ID, "/")[1] }
	create := func(name string, size int64, params map[string]string) *csiflow.Volume {
		t.Helper()
		v, err := e.c.Create(ctx, name, size, params, csiflow.MountCap(snw, ""))
		must(t, err)
		return v
	}

	// The first VG loses room to a volume named there; the VGs are alike.
	create("pvc-ballast", 1024*mib, map[string]string{"volumeGroup": vg})
	spread := create("pvc-spread", 64*mib, map[string]string{"volumeGroups": both})
	packed := create("pvc-pack", 64*mib, map[string]string{"volumeGroups": both, "volumeGroupPolicy": "pack"})
	tagged := create("pvc-tag", 64*mib, map[string]string{"volumeGroups": "@fast", "volumeGroupPolicy": "pack"})
	if in(spread) != vg2 || in(packed) != vg || in(tagged) != vg2 {
		t.Fatalf("spread went to %s (want %s), pack to %s (want %s), @fast to %s (want %s)",
			in(spread), vg2, in(packed), vg, in(tagged), vg2)
	}
	if spread.Context["volumeGroup"] != vg2 {
		t.Errorf("volume context %v: want volumeGroup %s", spread.Context, vg2)
	}

	// The second VG now has less room than the first: spread would pick
	// the first, but the retry finds its volume in the second.
	create("pvc-ballast2", 2048*mib, map[string]string{"volumeGroup": vg2})
	again := create("pvc-spread", 64*mib, map[string]string{"volumeGroups": both})
	if again.ID != spread.ID {
		t.Fatalf("retried create gave %s, first %s", again.ID, spread.ID)
	}
	if fresh := create("pvc-spread-2", 64*mib, map[string]string{"volumeGroups": both}); in(fresh) != vg {
		t.Errorf("spread after the second VG filled went to %s, want %s", in(fresh), vg)
	}

	// Capacity: both VGs added up, the largest volume the roomier one's.
	capacity := func(params map[string]string) *csi.GetCapacityResponse {
		t.Helper()
		c, err := e.c.Controller.GetCapacity(ctx, &csi.GetCapacityRequest{Parameters: params})
		must(t, err)
		return c
	}
	one, two := capacity(map[string]string{"volumeGroup": vg}), capacity(map[string]string{"volumeGroup": vg2})
	sum := capacity(map[string]string{"volumeGroups": both})
	if sum.GetAvailableCapacity() != one.GetAvailableCapacity()+two.GetAvailableCapacity() ||
		sum.GetMaximumVolumeSize().GetValue() != max(one.GetMaximumVolumeSize().GetValue(), two.GetMaximumVolumeSize().GetValue()) {
		t.Errorf("capacity of both %d (largest %d); alone %d (%d) and %d (%d)", sum.GetAvailableCapacity(), sum.GetMaximumVolumeSize().GetValue(),
			one.GetAvailableCapacity(), one.GetMaximumVolumeSize().GetValue(), two.GetAvailableCapacity(), two.GetMaximumVolumeSize().GetValue())
	}
	if fast := capacity(map[string]string{"volumeGroups": "@fast"}); fast.GetAvailableCapacity() != two.GetAvailableCapacity() {
		t.Errorf("capacity of @fast %d, want %s's %d", fast.GetAvailableCapacity(), vg2, two.GetAvailableCapacity())
	}

	// Too large for either VG, though not for both together.
	_, err := e.c.Create(ctx, "pvc-huge", sum.GetMaximumVolumeSize().GetValue()+64*mib, map[string]string{"volumeGroups": both}, csiflow.MountCap(snw, ""))
	wantCode(t, "larger than either VG", err, codes.ResourceExhausted)
	for _, g := range []string{vg, vg2} {
		if _, err := e.lvm.GetLV(ctx, g, "pvc-huge"); err == nil {
			t.Errorf("the refused volume was carved in %s", g)
		}
	}

	// A volume in the second VG serves data, and its clone stays there.
	target := e.path("target")
	must(t, spread.Up(ctx, node, e.path("staging"), target))
	data := randomBytes(t, 2*mib)
	writeSynced(t, filepath.Join(target, "data"), data)
	must(t, spread.Down(ctx, target))
	clone, err := e.c.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-clone", CapacityRange: &csi.CapacityRange{RequiredBytes: 64 * mib},
		VolumeCapabilities: []*csi.VolumeCapability{spread.Cap}, Parameters: map[string]string{"volumeGroups": both, "volumeGroupPolicy": "pack"},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: spread.ID}}},
	})
	must(t, err)
	cv := e.c.Wrap(clone.GetVolume(), spread.Cap)
	if in(cv) != vg2 {
		t.Fatalf("clone of a volume in %s went to %s", vg2, in(cv))
	}
	cloneTarget := e.path("clone")
	must(t, cv.Up(ctx, node, e.path("clone-staging"), cloneTarget))
	if got := readPrefix(t, filepath.Join(cloneTarget, "data"), len(data)); !bytes.Equal(got, data) {
		t.Fatal("the clone's data differs from its source's")
	}
	must(t, cv.Down(ctx, cloneTarget))
	_, err = e.c.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-clone-elsewhere", CapacityRange: &csi.CapacityRange{RequiredBytes: 64 * mib},
		VolumeCapabilities: []*csi.VolumeCapability{spread.Cap}, Parameters: map[string]string{"volumeGroups": vg},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: spread.ID}}},
	})
	wantCode(t, "a clone into a choice without its source's VG", err, codes.InvalidArgument)
}
