package csi

import (
	"context"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/test/lvmfake"
)

// TestModifyVolumeCodes: MODIFY_VOLUME is advertised by a backend that
// modifies; mutable parameters shape a new volume and change it after;
// unknown and immutable keys are INVALID_ARGUMENT, unknown volumes
// NOT_FOUND.
func TestModifyVolumeCodes(t *testing.T) {
	f := lvmfake.New(100*mib, "vg0")
	f.SetPVCount("vg0", 2)
	c := serve(t, f, f)
	ctx := context.Background()

	caps, err := c.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(caps.GetCapabilities(), func(c *csi.ControllerServiceCapability) bool {
		return c.GetRpc().GetType() == csi.ControllerServiceCapability_RPC_MODIFY_VOLUME
	}) {
		t.Error("MODIFY_VOLUME not advertised")
	}

	raid := createReq("pvc-raid", 4*mib, nil)
	raid.MutableParameters = map[string]string{ParamMirrors: "1"}
	if _, err := c.CreateVolume(ctx, raid); err != nil {
		t.Fatal(err)
	}
	if lv, _ := f.LV("vg0", "pvc-raid"); lv.Layout != "raid,raid1" {
		t.Errorf("created with mutable mirrors 1: layout %q", lv.Layout)
	}
	if _, err := c.CreateVolume(ctx, raid); err != nil {
		t.Errorf("the same create again: %v", err)
	}
	linear := createReq("pvc-lin", 4*mib, map[string]string{ParamMirrors: "1"})
	linear.MutableParameters = map[string]string{ParamMirrors: "0"}
	resp, err := c.CreateVolume(ctx, linear)
	if err != nil {
		t.Fatal(err)
	}
	if lv, _ := f.LV("vg0", "pvc-lin"); lv.Layout != "linear" {
		t.Errorf("StorageClass mirrors 1, mutable 0: layout %q, want linear", lv.Layout)
	}
	id := resp.GetVolume().GetVolumeId()

	bad := createReq("pvc-bad", 4*mib, nil)
	bad.MutableParameters = map[string]string{"XXX_FakeKey": "XXX_FakeValue"}
	_, err = c.CreateVolume(ctx, bad)
	wantCode(t, "create with an unknown mutable key", err, codes.InvalidArgument)
	striped := createReq("pvc-bad", 4*mib, map[string]string{ParamStripes: "2"})
	striped.MutableParameters = map[string]string{ParamMirrors: "1"}
	_, err = c.CreateVolume(ctx, striped)
	wantCode(t, "create striped with mutable mirrors", err, codes.InvalidArgument)
	if _, ok := f.LV("vg0", "pvc-bad"); ok {
		t.Error("a refused create made its LV")
	}

	modify := func(id string, params map[string]string) error {
		_, err := c.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{VolumeId: id, MutableParameters: params})
		return err
	}
	if err := modify(id, map[string]string{ParamMirrors: "1"}); err != nil {
		t.Fatal(err)
	}
	if lv, _ := f.LV("vg0", "pvc-lin"); lv.Layout != "raid,raid1" {
		t.Errorf("modified to mirrors 1: layout %q", lv.Layout)
	}
	for what, tc := range map[string]struct {
		id     string
		params map[string]string
		code   codes.Code
	}{
		"no id":           {"", map[string]string{ParamMirrors: "1"}, codes.InvalidArgument},
		"foreign id":      {"non-existing-volume-id", map[string]string{ParamMirrors: "1"}, codes.NotFound},
		"missing volume":  {"node-a/vg0/nope", map[string]string{ParamMirrors: "1"}, codes.NotFound},
		"unknown key":     {id, map[string]string{"XXX_FakeKey": "XXX_FakeValue"}, codes.InvalidArgument},
		"immutable key":   {id, map[string]string{ParamFsType: "xfs"}, codes.InvalidArgument},
		"too many legs":   {id, map[string]string{ParamMirrors: "64"}, codes.InvalidArgument},
		"no room":         {id, map[string]string{ParamMirrors: "2"}, codes.ResourceExhausted},
		"nothing, absent": {"node-a/vg0/nope", nil, codes.NotFound},
	} {
		wantCode(t, what, modify(tc.id, tc.params), tc.code)
	}
	if err := modify(id, nil); err != nil {
		t.Errorf("modify of nothing: %v", err)
	}
}

// noModify is a backend that cannot modify volumes.
type noModify struct{ Backend }

// TestNoModifyWithoutModifier: a backend without ModifyVolume does not
// advertise MODIFY_VOLUME, and refuses mutable parameters.
func TestNoModifyWithoutModifier(t *testing.T) {
	c := NewController(noModify{})
	caps, err := c.ControllerGetCapabilities(context.Background(), &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range caps.GetCapabilities() {
		if cp.GetRpc().GetType() == csi.ControllerServiceCapability_RPC_MODIFY_VOLUME {
			t.Error("MODIFY_VOLUME advertised without a Modifier")
		}
	}
	_, err = c.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{VolumeId: "n/vg/lv", MutableParameters: map[string]string{ParamMirrors: "1"}})
	if volume.CodeOf(err) != codes.Unimplemented {
		t.Errorf("modify without a Modifier: %v, want UNIMPLEMENTED", err)
	}
}
