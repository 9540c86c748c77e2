package lvm

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A value built from a VG's report is built once per report: again after a
// change of the VG, after the report's max age, and for every read that is
// no query; a failed build keeps nothing.
func TestDerivedFromLVsIsBuiltOncePerReport(t *testing.T) {
	x, r, now := newCacheUnderTest(t)
	builds := 0
	build := func(lvs []LV) (any, error) { builds++; return len(lvs), nil }
	get := func(r Reads) any {
		t.Helper()
		v, err := x.DerivedFromLVs(ctx, r, "carve-thin", "count", build)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	first := get(Cached)
	for range 3 {
		if v := get(Cached); v != first {
			t.Errorf("kept value %v, built %v", v, first)
		}
	}
	if builds != 1 || r.count("lvs") != 1 {
		t.Errorf("four queries: %d builds, %d lvs; want one of each", builds, r.count("lvs"))
	}
	if err := x.Activate(context.Background(), "carve-thin", "thin1"); err != nil {
		t.Fatal(err)
	}
	get(Cached)
	if builds != 2 {
		t.Errorf("after a change of the VG: %d builds, want 2", builds)
	}
	*now = now.Add(2 * time.Minute)
	get(Cached)
	if builds != 3 || r.count("lvs") != 3 {
		t.Errorf("after the max age: %d builds, %d lvs; want 3 of each", builds, r.count("lvs"))
	}
	get(Fresh)
	get(Fresh)
	if builds != 5 {
		t.Errorf("two reads that are no query: %d builds in all, want 5", builds)
	}
	// Another key is another value; a failed build keeps nothing.
	if _, err := x.DerivedFromLVs(ctx, Cached, "carve-thin", "other", func([]LV) (any, error) { return nil, errors.New("no") }); err == nil {
		t.Error("a failed build answered")
	}
	if v, err := x.DerivedFromLVs(ctx, Cached, "carve-thin", "other", build); err != nil || v == nil {
		t.Errorf("after a failed build: %v, %v", v, err)
	}
	if _, err := x.DerivedFromLVs(ctx, Cached, "bad/vg", "count", build); err == nil {
		t.Error("an invalid VG name was taken")
	}
}

// A change that runs while the report is read keeps the value from being
// kept: it may not hold the change.
func TestDerivedFromLVsAcrossAChangeIsNotKept(t *testing.T) {
	x, r, _ := newCacheUnderTest(t)
	r.duringReport = func() { x.Invalidate("carve-thin") }
	builds := 0
	build := func(lvs []LV) (any, error) { builds++; return len(lvs), nil }
	for range 2 {
		if _, err := x.DerivedFromLVs(ctx, Cached, "carve-thin", "count", build); err != nil {
			t.Fatal(err)
		}
	}
	if builds != 2 {
		t.Errorf("%d builds, want 2: a value read across a change must not be kept", builds)
	}
}
