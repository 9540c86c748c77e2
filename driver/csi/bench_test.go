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
	klog.SetOutput(discard{})
	klog.LogToStderr(false)
	defer klog.LogToStderr(true)
	f := lvmfake.New(1<<40, "vg0")
	c := serve(b, f, f)
	ctx := context.Background()
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

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
