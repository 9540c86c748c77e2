//go:build vmtest

package nodesafety

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"carve.dev/carve/driver/mapper"
)

// TestForeignDeviceUnderALayerName: a device-mapper device someone made
// under the name of a volume's layer (VG-LV-carve), over another device
// (here the untagged LV "plain"), is not Carve's: staging the volume is
// refused rather than formatting and mounting it, a snapshot of the volume
// is refused rather than suspending it, an unstage refuses to remove it;
// it stays as it was, and so does everything guarded.
func TestForeignDeviceUnderALayerName(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	name, err := mapper.Name(vg, filepath.Base(e.victim.ID), mapper.LinearLayer)
	must(t, err)
	if out, err := exec.Command("dmsetup", "create", name, "--table", "0 16384 linear /dev/"+vg+"/plain 0").CombinedOutput(); err != nil {
		t.Fatalf("dmsetup create %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("dmsetup", "remove", name).Run() })
	staging := e.root + "/staging"
	for _, c := range []struct {
		what string
		call func() error
	}{
		{"stage", func() error { return e.stage(e.victim.ID, staging, ext4) }},
		{"snapshot", func() error {
			_, err := e.c.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-victim", SourceVolumeId: e.victim.ID})
			return err
		}},
		{"unstage", func() error { return e.unstage(e.victim.ID, staging) }},
	} {
		if err := c.call(); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("%s with a foreign device under the layer's name: %v, want FAILED_PRECONDITION", c.what, err)
		}
		out, err := exec.Command("dmsetup", "info", "-c", "--noheadings", "-o", "suspended", name).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "Active" {
			t.Fatalf("after %s: the foreign device %s: %q (%v), want it there and active", c.what, name, out, err)
		}
		e.check(t)
	}
	// The canary's own layer goes with its unstage, so that the VG can go.
	must(t, e.canary.Down(ctx, e.canaryTarget))
}
