package volume_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/util/validation"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

const mib = 1 << 20

func TestLVName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"pvc-0b6a0e5c-3d5f-4b1e-9a3e-1f2d3c4b5a69", "pvc-0b6a0e5c-3d5f-4b1e-9a3e-1f2d3c4b5a69"},
		{"data.1", "data.1"},
	} {
		if got := volume.LVName(tc.in); got != tc.want {
			t.Errorf("LVName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Names that are not safe LV names, and names that could collide with
	// hashed ones, are hashed: deterministic, distinct, valid.
	for _, in := range []string{"sanity Node Service 1", strings.Repeat("x", 128), "csi-abc", "snapshot1", "Upper", "-x", "ends-", "ends."} {
		got := volume.LVName(in)
		if !strings.HasPrefix(got, "csi-") || len(got) != 36 {
			t.Errorf("LVName(%q) = %q, want csi-<32 hex>", in, got)
		}
		if err := lvm.ValidateLVName(got); err != nil {
			t.Errorf("LVName(%q) = %q is not a valid LV name: %v", in, got, err)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("LVName(%q) = %q is not a Kubernetes object name: %v", in, got, errs)
		}
		if again := volume.LVName(in); again != got {
			t.Errorf("LVName(%q) not deterministic: %q then %q", in, got, again)
		}
	}
	if volume.LVName("a b") == volume.LVName("a  b") {
		t.Error("different names hashed to the same LV name")
	}
}

func TestParseID(t *testing.T) {
	id := volume.ID{Node: "n1.example", VG: "vg0", LV: "pvc-1"}
	got, err := volume.ParseID(id.String())
	if err != nil || got != id {
		t.Fatalf("ParseID(%q) = %v, %v; want %v", id.String(), got, err, id)
	}
	for _, bad := range []string{"", "a/b", "a/b/c/d", "/vg/lv", "n//lv", "n/vg/", "fake-vol-id"} {
		if _, err := volume.ParseID(bad); !errors.Is(err, volume.ErrInvalidID) {
			t.Errorf("ParseID(%q) error = %v, want ErrInvalidID", bad, err)
		}
	}
}

func TestCapacityOf(t *testing.T) {
	vg := volume.VGSpace{Free: 60 * mib, ExtentSize: 4 * mib, PVFree: []uint64{10 * mib, 30 * mib, 20 * mib},
		Pools: []volume.PoolSpace{{Name: "pool", Size: 40 * mib, Free: 10 * mib}}}
	for _, tc := range []struct {
		name       string
		t          volume.Type
		ratio      float64
		avail, max int64
	}{
		{"linear", volume.Type{}, 1, 60 * mib, 60 * mib},
		{"raid1: 2nd largest PV less a metadata extent", volume.Type{Mirrors: 1}, 1, 30 * mib, 16 * mib},
		{"raid1 needing more PVs than there are", volume.Type{Mirrors: 3}, 1, 0, 0},
		{"striped over 3: 3 × the 3rd largest", volume.Type{Stripes: 3}, 1, 60 * mib, 30 * mib},
		{"raid1 with integrity: less 8 MiB of integrity metadata too", volume.Type{Mirrors: 1, Integrity: true}, 1, 30 * mib, 8 * mib},
		{"raid5 on 3: whole rows of 2 extents with their parity and metadata in the 3rd largest", volume.Type{RAID: "raid5", Stripes: 2},
			1, 40 * mib, 8 * mib},
		{"raid5 needing 4 PVs", volume.Type{RAID: "raid5", Stripes: 3}, 1, 0, 0},
		{"raid10 needing 4 PVs", volume.Type{RAID: "raid10", Stripes: 2}, 1, 0, 0},
		{"raid6 needing 5 PVs", volume.Type{RAID: "raid6", Stripes: 3}, 1, 0, 0},
		{"thin × ratio", volume.Type{ThinPool: "pool"}, 2.5, 25 * mib, 25 * mib},
		{"thin in an unreported pool", volume.Type{ThinPool: "other"}, 1, 0, 0},
	} {
		c := volume.CapacityOf(vg, tc.t, tc.ratio)
		if c.AvailableBytes != tc.avail || c.MaximumVolumeBytes != tc.max {
			t.Errorf("%s: %+v, want available %d, max %d", tc.name, c, tc.avail, tc.max)
		}
		// The same with a metadata area reported: room enough changes
		// nothing, a (nearly) full one leaves no capacity of any type.
		roomy, full := vg, vg
		roomy.MetadataSize, roomy.MetadataFree = 1<<20, volume.MetadataReserve
		full.MetadataSize, full.MetadataFree = 1<<20, volume.MetadataReserve-1
		if c := volume.CapacityOf(roomy, tc.t, tc.ratio); c.AvailableBytes != tc.avail || c.MaximumVolumeBytes != tc.max {
			t.Errorf("%s, metadata room: %+v, want available %d, max %d", tc.name, c, tc.avail, tc.max)
		}
		if c := volume.CapacityOf(full, tc.t, tc.ratio); c != (volume.Capacity{}) {
			t.Errorf("%s, metadata full: %+v, want none", tc.name, c)
		}
		sick := vg
		sick.Health = []volume.Problem{{Kind: volume.Degraded, Reason: "MissingPhysicalVolume"}}
		if c := volume.CapacityOf(sick, tc.t, tc.ratio); c != (volume.Capacity{}) {
			t.Errorf("%s, a PV missing: %+v, want none", tc.name, c)
		}
	}
}

// raid5, raid6 and raid10 with N data stripes: K images (N+1, N+2, 2N),
// each the K-th largest PV's free space less a metadata extent.
func TestCapacityOfRAIDLevels(t *testing.T) {
	vg := volume.VGSpace{Free: 168 * mib, ExtentSize: 4 * mib, PVFree: []uint64{20 * mib, 40 * mib, 32 * mib, 40 * mib, 36 * mib}}
	for _, tc := range []struct {
		t          volume.Type
		avail, max int64
	}{
		{volume.Type{RAID: "raid5", Stripes: 2}, 168 * mib / 3 * 2, 2 * (36 - 4) * mib},
		{volume.Type{RAID: "raid5", Stripes: 4}, 168 * mib / 5 * 4, 4 * (20 - 4) * mib},
		{volume.Type{RAID: "raid6", Stripes: 3}, 168 * mib / 5 * 3, 3 * (20 - 4) * mib},
		{volume.Type{RAID: "raid10", Stripes: 2}, 168 * mib / 4 * 2, 2 * (32 - 4) * mib},
		{volume.Type{RAID: "raid6", Stripes: 4}, 0, 0}, // 6 PVs
	} {
		if c := volume.CapacityOf(vg, tc.t, 1); c.AvailableBytes != tc.avail || c.MaximumVolumeBytes != tc.max {
			t.Errorf("%+v: %+v, want available %d, max %d", tc.t, c, tc.avail, tc.max)
		}
	}
}

func TestProblemKindNames(t *testing.T) {
	for _, k := range []volume.ProblemKind{volume.Degraded, volume.Inaccessible, volume.DataLoss} {
		if k.String() == "" || volume.ParseProblemKind(k.String()) != k {
			t.Errorf("kind %d: name %q does not parse back", k, k)
		}
	}
	if volume.ParseProblemKind("Bogus") != 0 {
		t.Error("an unknown name parsed to a kind")
	}
}

func TestCodeOf(t *testing.T) {
	if got := volume.CodeOf(errors.New("boom")); got != codes.Internal {
		t.Errorf("unknown error -> %v, want Internal", got)
	}
	wrapped := errors.Join(errors.New("ctx"), volume.ErrVolumeNotFound)
	if got := volume.CodeOf(wrapped); got != codes.NotFound {
		t.Errorf("wrapped not-found -> %v, want NotFound", got)
	}
	if got := volume.CodeOf(context.DeadlineExceeded); got != codes.DeadlineExceeded {
		t.Errorf("deadline -> %v", got)
	}
	pending := fmt.Errorf("create: %w", &volume.PendingError{Work: "copy", LV: "vg0/x", Done: 1, Total: 4})
	if got := volume.CodeOf(pending); got != codes.Aborted {
		t.Errorf("data work pending -> %v, want Aborted (in progress, retry)", got)
	}
}

// FuzzParseID: an accepted ID has three non-empty parts that print back to
// the same string.
func FuzzParseID(f *testing.F) {
	f.Add("node/vg/lv")
	f.Add("fake-vol-id")
	f.Add("a//b")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := volume.ParseID(s)
		if err != nil {
			if !errors.Is(err, volume.ErrInvalidID) {
				t.Fatalf("error %v is not ErrInvalidID", err)
			}
			return
		}
		if id.String() != s || id.Node == "" || id.VG == "" || id.LV == "" || strings.Contains(id.LV, "/") {
			t.Fatalf("ParseID(%q) = %+v", s, id)
		}
	})
}

func TestCanCache(t *testing.T) {
	for _, tc := range []struct {
		t  volume.Type
		ok bool
	}{{volume.Type{}, true}, {volume.Type{Stripes: 2}, true}, {volume.Type{ThinPool: "pool"}, false}, {volume.Type{Mirrors: 1}, false}} {
		if err := tc.t.CanCache(); (err == nil) != tc.ok || err != nil && !errors.Is(err, volume.ErrInvalidArgument) {
			t.Errorf("CanCache(%+v) = %v, want ok %v (else INVALID_ARGUMENT)", tc.t, err, tc.ok)
		}
	}
}
