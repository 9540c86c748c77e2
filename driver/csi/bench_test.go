package csi

import (
	"context"
	"fmt"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"

	"carve.dev/carve/test/lvmfake"
)

// BenchmarkCreateDeleteOverGRPC measures Carve's own cost of a
// CreateVolume + DeleteVolume pair over the unix socket, interceptors
// included, with LVM replaced by the in-memory fake: the time lvm2 itself
// takes is measured by the VM suites, not here.
func BenchmarkCreateDeleteOverGRPC(b *testing.B) {
	c, ctx := quietServe(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		resp, err := c.CreateVolume(ctx, createReq(fmt.Sprintf("pvc-%d", i), 4*mib, nil))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId()}); err != nil {
			b.Fatal(err)
		}
	}
}

// quietServe serves a controller over the fake, its logs off for the
// benchmark.
func quietServe(b *testing.B) (csi.ControllerClient, context.Context) {
	klog.SetOutput(discard{})
	klog.LogToStderr(false)
	b.Cleanup(func() { klog.LogToStderr(true) })
	f := lvmfake.New(1<<40, "vg0")
	return serve(b, f, f), context.Background()
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkListVolumes1000OverGRPC measures Carve's own cost of the reads
// the scale benchmark times at 1000 volumes (test/bench, in the VM): a
// whole ListVolumes and a page of 100, over the unix socket, from the
// fake's in-memory report.
func BenchmarkListVolumes1000OverGRPC(b *testing.B) {
	c, ctx := quietServe(b)
	for i := range 1000 {
		if _, err := c.CreateVolume(ctx, createReq(fmt.Sprintf("pvc-%04d", i), 4*mib, nil)); err != nil {
			b.Fatal(err)
		}
	}
	for _, max := range []int32{0, 100} {
		b.Run(fmt.Sprintf("max_entries=%d", max), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: max})
				if err != nil || len(resp.GetEntries()) != int(max) && max > 0 || max == 0 && len(resp.GetEntries()) != 1000 {
					b.Fatalf("%d entries, %v", len(resp.GetEntries()), err)
				}
			}
		})
	}
}
