package csi

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

// TestWriteCacheParams: a size (Ki/Mi/Gi; 0 for none) and, for a cache,
// its PVs; PVs without a size, PVs that are neither paths nor @tags, and
// a cache for a thin or raid1 class are INVALID_ARGUMENT.
func TestWriteCacheParams(t *testing.T) {
	m, err := parseMutable(map[string]string{ParamWriteCache: "1Gi", ParamWriteCachePVs: "@fast, /dev/nvme1n1"})
	if err != nil || m.WriteCache == nil || m.WriteCache.Size != 1<<30 || len(m.WriteCache.On) != 2 || m.WriteCache.On[1] != "/dev/nvme1n1" {
		t.Errorf("parseMutable: %+v, %v", m.WriteCache, err)
	}
	if m, err := parseMutable(map[string]string{ParamWriteCache: "0"}); err != nil || m.WriteCache == nil || m.WriteCache.Size != 0 {
		t.Errorf("no cache: %+v, %v", m, err)
	}
	// PVs without a size, a size without PVs, PVs that are neither paths
	// nor @tags, and sizes that are no sizes.
	bad := [][2]string{{"", "@fast"}, {"1Gi", ""}, {"1Gi", "fast"}, {"1Gi", "/dev/../etc/x"}, {"1Gi", ","},
		{"-1", "@fast"}, {"lots", "@fast"}}
	for _, b := range bad {
		params := map[string]string{ParamWriteCachePVs: b[1]}
		if b[0] != "" {
			params[ParamWriteCache] = b[0]
		}
		if _, err := parseMutable(params); !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("mutable %v: %v, want INVALID_ARGUMENT", params, err)
		}
	}
	cache := map[string]string{ParamWriteCache: "64Mi", ParamWriteCachePVs: "@fast"}
	p, err := parseParams(cache, []string{"vg0"})
	if err != nil || p.WriteCache == nil || p.WriteCache.Size != 64<<20 {
		t.Errorf("StorageClass cache: %+v, %v", p.WriteCache, err)
	}
	for k, v := range map[string]string{ParamThinPool: "pool", ParamMirrors: "1"} {
		params := map[string]string{k: v, ParamWriteCache: "64Mi", ParamWriteCachePVs: "@fast"}
		if _, err := parseParams(params, []string{"vg0"}); !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("a cache with %s=%s: %v, want INVALID_ARGUMENT", k, v, err)
		}
	}
}

// TestCreateWithWriteCache: a class with a cache creates the volume with
// it attached, a retry is a no-op; a cache that does not fit undoes the
// creation and says RESOURCE_EXHAUSTED.
func TestCreateWithWriteCache(t *testing.T) {
	f := lvmfake.New(100*mib, "vg0")
	c := serve(t, f, f)
	ctx := context.Background()
	req := createReq("pvc-c", 16*mib, map[string]string{ParamWriteCache: "8Mi", ParamWriteCachePVs: "@fast"})
	for range 2 {
		if _, err := c.CreateVolume(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	all, _ := f.ListAllLVs(ctx, lvm.Fresh, "vg0")
	if cv, ok := lvm.AttachedCacheVol(all, "pvc-c"); !ok || cv.Size != 8*mib {
		t.Errorf("created with a cache: %+v, %v", cv, ok)
	}
	big := createReq("pvc-big", 16*mib, map[string]string{ParamWriteCache: "1Gi", ParamWriteCachePVs: "@fast"})
	_, err := c.CreateVolume(ctx, big)
	wantCode(t, "a cache larger than the VG", err, codes.ResourceExhausted)
	if _, ok := f.LV("vg0", "pvc-big"); ok {
		t.Error("the volume whose cache did not fit was left behind")
	}
}
