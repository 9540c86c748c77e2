package volume

import (
	"errors"
	"strings"
	"testing"
)

const mib = 1 << 20

// threeVGs: a small, a large and a middling VG, "b" tagged fast like "c".
func threeVGs() []VGSpace {
	return []VGSpace{
		{Name: "a", Size: 100 * mib, Free: 40 * mib, ExtentSize: 4 * mib, PVFree: []uint64{40 * mib}},
		{Name: "b", Size: 500 * mib, Free: 300 * mib, ExtentSize: 4 * mib, PVFree: []uint64{200 * mib, 100 * mib}, Tags: []string{"fast"}},
		{Name: "c", Size: 200 * mib, Free: 120 * mib, ExtentSize: 4 * mib, PVFree: []uint64{60 * mib, 60 * mib}, Tags: []string{"fast", "x"}},
	}
}

// TestPickVG: spread takes the most room, pack the least that fits; a
// VG that cannot hold the volume (its type's largest volume, not its free
// space) is never picked; none that can is RESOURCE_EXHAUSTED naming each.
func TestPickVG(t *testing.T) {
	all := VGChoice{Names: []string{"a", "b", "c"}}
	for _, tc := range []struct {
		name   string
		c      VGChoice
		t      Type
		need   int64
		want   string
		errHas string
	}{
		{"spread", all, Type{}, 10 * mib, "b", ""},
		{"spread is the default", VGChoice{Names: []string{"c", "a"}}, Type{}, 10 * mib, "c", ""},
		{"pack", VGChoice{Names: all.Names, Policy: Pack}, Type{}, 10 * mib, "a", ""},
		{"pack skips what does not fit", VGChoice{Names: all.Names, Policy: Pack}, Type{}, 100 * mib, "c", ""},
		{"tag", VGChoice{Tag: "fast", Policy: Pack}, Type{}, 10 * mib, "c", ""},
		{"tag spread", VGChoice{Tag: "fast"}, Type{}, 10 * mib, "b", ""},
		// Two stripes: b's largest is 2 x 100 MiB, c's 2 x 60 MiB, a none.
		{"striped by its rule", VGChoice{Names: all.Names, Policy: Pack}, Type{Stripes: 2}, 110 * mib, "c", ""},
		{"striped too large for c", VGChoice{Names: all.Names, Policy: Pack}, Type{Stripes: 2}, 150 * mib, "b", ""},
		{"names not on the node", VGChoice{Names: []string{"x", "y"}}, Type{}, mib, "", "no volume groups x,y on this node"},
		{"tag nowhere", VGChoice{Tag: "slow"}, Type{}, mib, "", "no the volume groups tagged slow"},
		{"nothing fits", all, Type{}, 400 * mib, "", "a: 40 MiB, b: 300 MiB, c: 120 MiB"},
	} {
		got, err := PickVG(tc.c, threeVGs(), tc.t, DefaultOverprovision, tc.need)
		if tc.errHas != "" {
			if !errors.Is(err, ErrResourceExhausted) || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("%s: %q, %v; want RESOURCE_EXHAUSTED with %q", tc.name, got, err, tc.errHas)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// TestPickVGSkipsUnchangeable: a VG with a missing PV has no room,
// however much its report shows.
func TestPickVGSkipsUnchangeable(t *testing.T) {
	spaces := threeVGs()
	spaces[1].Health = []Problem{{Kind: Degraded, Reason: "MissingPhysicalVolume"}}
	if got, err := PickVG(VGChoice{Tag: "fast"}, spaces, Type{}, DefaultOverprovision, mib); err != nil || got != "c" {
		t.Errorf("got %q, %v; want c", got, err)
	}
}

// TestCapacityOfChoice: the room of the class's VGs added up, the
// largest volume the largest one VG takes; VGs outside it count nothing.
func TestCapacityOfChoice(t *testing.T) {
	got := CapacityOfChoice(VGChoice{Names: []string{"a", "c", "zz"}}, threeVGs(), Type{}, DefaultOverprovision)
	if got.AvailableBytes != 160*mib || got.MaximumVolumeBytes != 120*mib {
		t.Errorf("names: %+v; want 160 MiB available, 120 MiB at most", got)
	}
	got = CapacityOfChoice(VGChoice{Tag: "fast"}, threeVGs(), Type{Stripes: 2}, DefaultOverprovision)
	if got.MaximumVolumeBytes != 200*mib {
		t.Errorf("tag, striped: %+v; want 200 MiB at most (b's two PVs)", got)
	}
	if got := CapacityOfChoice(VGChoice{Tag: "none"}, threeVGs(), Type{}, DefaultOverprovision); got != (Capacity{}) {
		t.Errorf("no VG: %+v", got)
	}
}

// TestVGChoiceValidate: what reaches lvm2 is checked.
func TestVGChoiceValidate(t *testing.T) {
	for _, c := range []VGChoice{{}, {Names: []string{"a"}, Tag: "t"}, {Names: []string{"a b"}}, {Tag: "-x"}, {Names: []string{"a"}, Policy: "fill"}} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: %v, want INVALID_ARGUMENT", c, err)
		}
	}
}

// TestVGChoiceIncludes: names need no report; a tag is read from it.
func TestVGChoiceIncludes(t *testing.T) {
	for _, tc := range []struct {
		c    VGChoice
		vg   string
		want bool
	}{
		{VGChoice{Names: []string{"a", "zz"}}, "zz", true},
		{VGChoice{Names: []string{"a"}}, "b", false},
		{VGChoice{Tag: "fast"}, "c", true},
		{VGChoice{Tag: "fast"}, "a", false},
		{VGChoice{Tag: "fast"}, "zz", false},
	} {
		if got := tc.c.Includes(tc.vg, threeVGs()); got != tc.want {
			t.Errorf("%s includes %s: %v, want %v", tc.c, tc.vg, got, tc.want)
		}
	}
}
