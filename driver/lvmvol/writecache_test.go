package lvmvol_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

func writeCache(size uint64, on ...string) volume.Mutable {
	return volume.Mutable{WriteCache: &volume.WriteCache{Size: size, On: on}}
}

// cacheState is what a test checks of a volume's cache: attached (and of
// what size), its tag, and whether a cachevol is left visible.
func cacheState(t *testing.T, f *lvmfake.LVM, name string) (attached uint64, tagged, leftover bool) {
	t.Helper()
	all, err := f.ListAllLVs(ctx, lvm.Fresh, vg)
	if err != nil {
		t.Fatal(err)
	}
	if cv, ok := lvm.AttachedCacheVol(all, name); ok {
		attached = cv.Size
	}
	lv, _ := f.LV(vg, name)
	tagged = slices.ContainsFunc(lv.Tags, func(s string) bool { return strings.HasPrefix(s, "carve.dev/wcache=") })
	_, leftover = f.LV(vg, name+"_wcache")
	return attached, tagged, leftover
}

// TestWriteCacheAttachAndDetach: a cache is made on the PVs asked and
// attached; the same call again changes nothing; another size replaces
// it; size 0 writes it back, wipes its cachevol and removes it, giving
// the VG its space back.
func TestWriteCacheAttachAndDetach(t *testing.T) {
	m, f := newManager(t)
	v := mustCreate(t, m, "pvc-1", 16*mib)
	free := func() uint64 { return vgFree(f) }
	before := free()
	n := len(f.Calls)
	if _, err := m.ModifyVolume(ctx, v.ID, writeCache(4*mib, "@fast")); err != nil {
		t.Fatal(err)
	}
	if got, want := changes(f, n), []string{"ChangeTags", "CreateCacheVol", "AttachWriteCache"}; !slices.Equal(got, want) {
		t.Errorf("attach: changes %v, want %v", got, want)
	}
	if size, tagged, left := cacheState(t, f, "pvc-1"); size != 4*mib || !tagged || left || free() != before-4*mib {
		t.Errorf("after attach: cache %d, tagged %v, leftover %v, free %d", size, tagged, left, free())
	}
	n = len(f.Calls)
	if _, err := m.ModifyVolume(ctx, v.ID, writeCache(4*mib, "@fast")); err != nil || len(changes(f, n)) != 0 {
		t.Errorf("the same cache again: %v, changes %v", err, changes(f, n))
	}
	if _, err := m.ModifyVolume(ctx, v.ID, writeCache(8*mib, "@fast")); err != nil {
		t.Fatal(err)
	}
	if size, tagged, left := cacheState(t, f, "pvc-1"); size != 8*mib || !tagged || left {
		t.Errorf("after resizing: cache %d, tagged %v, leftover %v", size, tagged, left)
	}
	f.Wiped = nil
	n = len(f.Calls)
	if _, err := m.ModifyVolume(ctx, v.ID, writeCache(0)); err != nil {
		t.Fatal(err)
	}
	if got, want := changes(f, n), []string{"SplitCache", "Activate", "Wipe", "RemoveLVOf", "RemoveTags"}; !slices.Equal(got, want) {
		t.Errorf("detach: changes %v, want %v", got, want)
	}
	if !slices.Contains(f.Wiped, "/dev/vg0/pvc-1_wcache") {
		t.Errorf("the cachevol was not wiped before its removal: wiped %v", f.Wiped)
	}
	if size, tagged, left := cacheState(t, f, "pvc-1"); size != 0 || tagged || left || free() != before {
		t.Errorf("after detach: cache %d, tagged %v, leftover %v, free %d, want %d", size, tagged, left, free(), before)
	}
	n = len(f.Calls)
	if _, err := m.ModifyVolume(ctx, v.ID, writeCache(0)); err != nil || len(f.Calls) != n+1 {
		t.Errorf("no cache again: %v, calls %v, want the volume's lookup only", err, f.Calls[n:])
	}
}

// TestWriteCacheRefusals: thin and raid1 volumes take no cache, a cached
// volume takes no legs, bad PVs are refused, and none of it changes
// anything.
func TestWriteCacheRefusals(t *testing.T) {
	m, f := newManager(t)
	f.SetPVCount(vg, 2)
	f.PutThinPool(vg, "pool", 40*mib, 0)
	thin, _ := m.CreateVolume(ctx, volume.CreateRequest{Name: "pvc-thin", VG: vg, RequiredBytes: 4 * mib, Type: volume.Type{ThinPool: "pool"}, ParamsDigest: "p"})
	raid, _ := m.CreateVolume(ctx, volume.CreateRequest{Name: "pvc-raid", VG: vg, RequiredBytes: 4 * mib, Type: volume.Type{Mirrors: 1}, ParamsDigest: "p"})
	plain, _ := m.CreateVolume(ctx, req("pvc-1", 4*mib))
	n := len(f.Calls)
	for _, c := range []struct {
		what string
		id   volume.ID
		m    volume.Mutable
	}{
		{"thin", thin.ID, writeCache(4*mib, "@fast")},
		{"raid1", raid.ID, writeCache(4*mib, "@fast")},
		{"no PVs", plain.ID, writeCache(4 * mib)},
		{"a PV that is no path", plain.ID, writeCache(4*mib, "fast")},
	} {
		if _, err := m.ModifyVolume(ctx, c.id, c.m); volume.CodeOf(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", c.what, err)
		}
	}
	if got := changes(f, n); len(got) != 0 {
		t.Errorf("refusals changed %v", got)
	}
	if _, err := m.ModifyVolume(ctx, thin.ID, writeCache(0)); err != nil {
		t.Errorf("no cache for a thin volume: %v, want success (it has none)", err)
	}
	if _, err := m.ModifyVolume(ctx, plain.ID, writeCache(4*mib, "/dev/vdb")); err != nil {
		t.Fatal(err)
	}
	n = len(f.Calls)
	if _, err := m.ModifyVolume(ctx, plain.ID, mirrors(1)); volume.CodeOf(err) != codes.InvalidArgument {
		t.Errorf("legs for a cached volume: %v, want INVALID_ARGUMENT", err)
	}
	if got := changes(f, n); len(got) != 0 {
		t.Errorf("the refusal of legs changed %v", got)
	}
	// Both at once: the cache goes first, then the legs come.
	zero, one := writeCache(0), 1
	zero.Mirrors = &one
	if _, err := m.ModifyVolume(ctx, plain.ID, zero); err != nil {
		t.Fatalf("no cache and a leg at once: %v", err)
	}
	all, _ := f.ListAllLVs(ctx, lvm.Fresh, vg)
	if size, _, _ := cacheState(t, f, "pvc-1"); size != 0 || lvm.Mirrors(all, "pvc-1") != 1 {
		t.Errorf("after no cache and a leg: cache %d, mirrors %d", size, lvm.Mirrors(all, "pvc-1"))
	}
}

// TestWriteCacheConvergesAfterCrash: cut after each changing step of an
// attach and of a detach, the retry ends as an uninterrupted call does.
func TestWriteCacheConvergesAfterCrash(t *testing.T) {
	for _, c := range []struct {
		size  uint64
		steps []string
	}{
		{4 * mib, []string{"ChangeTags", "CreateCacheVol", "AttachWriteCache"}},
		{0, []string{"SplitCache", "Activate", "Wipe", "RemoveLVOf", "RemoveTags"}},
	} {
		for _, step := range c.steps {
			t.Run(step, func(t *testing.T) {
				m, f := newManager(t)
				v, _ := m.CreateVolume(ctx, req("pvc-1", 16*mib))
				if c.size == 0 {
					if _, err := m.ModifyVolume(ctx, v.ID, writeCache(8*mib, "@fast")); err != nil {
						t.Fatal(err)
					}
				}
				crash := errors.New("crash")
				f.Fail = func(call string) error {
					if call == step {
						return crash
					}
					return nil
				}
				if _, err := m.ModifyVolume(ctx, v.ID, writeCache(c.size, "@fast")); !errors.Is(err, crash) {
					t.Fatalf("modify with a crash at %s: %v", step, err)
				}
				f.Fail = nil
				if _, err := m.ModifyVolume(ctx, v.ID, writeCache(c.size, "@fast")); err != nil {
					t.Fatalf("retry: %v", err)
				}
				size, tagged, left := cacheState(t, f, "pvc-1")
				if size != c.size || tagged != (c.size > 0) || left {
					t.Errorf("after the retry: cache %d, tagged %v, leftover %v; want cache %d", size, tagged, left, c.size)
				}
				n := len(f.Calls)
				if _, err := m.ModifyVolume(ctx, v.ID, writeCache(c.size, "@fast")); err != nil || len(changes(f, n)) != 0 {
					t.Errorf("a third call: %v, changes %v", err, changes(f, n))
				}
			})
		}
	}
}

// TestDeleteWritesBackAndWipesTheCache: deleting a cached volume detaches
// its cache before the wipe (zeroes through the cache would not reach the
// volume's own PVs before lvremove dropped them) and wipes the cachevol.
func TestDeleteWritesBackAndWipesTheCache(t *testing.T) {
	m, f := newManager(t)
	free := func() uint64 { g, _ := f.GetVG(ctx, lvm.Fresh, vg); return g.Free }
	before := free()
	v, _ := m.CreateVolume(ctx, req("pvc-1", 16*mib))
	if _, err := m.ModifyVolume(ctx, v.ID, writeCache(4*mib, "@fast")); err != nil {
		t.Fatal(err)
	}
	f.Wiped = nil
	n := len(f.Calls)
	if err := m.DeleteVolume(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	calls := changes(f, n)
	split, wipeMain := slices.Index(calls, "SplitCache"), slices.Index(f.Wiped, "/dev/vg0/pvc-1")
	if split < 0 || !slices.Contains(f.Wiped, "/dev/vg0/pvc-1_wcache") || wipeMain < 0 {
		t.Errorf("delete: changes %v, wiped %v: want the cache split off, and the cachevol and the volume wiped", calls, f.Wiped)
	}
	if _, ok := f.LV(vg, "pvc-1_wcache"); ok || free() != before {
		t.Errorf("after delete: cachevol left %v, VG free %d, want %d", ok, free(), before)
	}
}
