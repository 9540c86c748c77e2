package lvmvol_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
	"carve.dev/carve/test/lvmfake"
)

func mirrors(n int) volume.Mutable { return volume.Mutable{Mirrors: &n} }

// changes are the fake's calls that change something, from call i on.
func changes(f *lvmfake.LVM, i int) []string {
	return slices.DeleteFunc(slices.Clone(f.Calls[i:]), func(c string) bool {
		return strings.HasPrefix(c, "Get") || strings.HasPrefix(c, "List") || strings.HasPrefix(c, "Check")
	})
}

// TestModifyMirrors: an unpublished linear volume becomes raid1 and back;
// it is held active for lvm2 and left inactive (unpublished) after; its
// tag records the legs; the same call twice changes nothing.
func TestModifyMirrors(t *testing.T) {
	m, f := newManager(t)
	f.SetPVCount(vg, 2)
	v, err := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	if err != nil {
		t.Fatal(err)
	}
	free := func() uint64 { g, _ := f.GetVG(ctx, lvm.Fresh, vg); return g.Free }
	before := free()
	n := len(f.Calls)
	if _, err := m.ModifyVolume(ctx, v.ID, mirrors(1)); err != nil {
		t.Fatal(err)
	}
	if got, want := changes(f, n), []string{"ChangeTags", "Activate", "ConvertMirrors", "Deactivate", "RemoveTags"}; !slices.Equal(got, want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	lv, _ := f.LV(vg, "pvc-1")
	all, _ := f.ListAllLVs(ctx, lvm.Fresh, vg)
	if lvm.Mirrors(all, "pvc-1") != 1 || !lv.HasTag("carve.dev/mirrors=1") || lv.Active || lv.HasTag("carve.dev/held") {
		t.Errorf("after modify: mirrors %d, LV %+v; want raid1, tagged, inactive, not held", lvm.Mirrors(all, "pvc-1"), lv)
	}
	if free() != before-8*mib {
		t.Errorf("VG free %d after a second leg, want %d", free(), before-8*mib)
	}
	n = len(f.Calls)
	if _, err := m.ModifyVolume(ctx, v.ID, mirrors(1)); err != nil {
		t.Fatal(err)
	}
	if got := changes(f, n); len(got) != 0 {
		t.Errorf("the same modify again changed %v", got)
	}
	// A CreateVolume retry for the volume now asks for other legs.
	if _, err := m.CreateVolume(ctx, req("pvc-1", 8*mib)); volume.CodeOf(err) != codes.AlreadyExists {
		t.Errorf("create retry with 0 mirrors of a raid1 volume: %v, want ALREADY_EXISTS", err)
	}
	if _, err := m.ModifyVolume(ctx, v.ID, mirrors(0)); err != nil {
		t.Fatal(err)
	}
	lv, _ = f.LV(vg, "pvc-1")
	if lv.Layout != "linear" || slices.ContainsFunc(lv.Tags, func(s string) bool { return strings.HasPrefix(s, "carve.dev/mirrors=") }) || lv.Active {
		t.Errorf("back to linear: %+v", lv)
	}
	if free() != before {
		t.Errorf("VG free %d after dropping the leg, want %d", free(), before)
	}
	if _, err := m.ModifyVolume(ctx, v.ID, volume.Mutable{}); err != nil {
		t.Errorf("modify of nothing: %v", err)
	}
}

// TestModifyPublishedStaysActive: a published volume converts online and
// stays published.
func TestModifyPublishedStaysActive(t *testing.T) {
	m, f := newManager(t)
	f.SetPVCount(vg, 3)
	v, _ := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	if _, err := m.PublishVolume(ctx, v.ID, node); err != nil {
		t.Fatal(err)
	}
	n := len(f.Calls)
	if _, err := m.ModifyVolume(ctx, v.ID, mirrors(2)); err != nil {
		t.Fatal(err)
	}
	if got, want := changes(f, n), []string{"ChangeTags", "ConvertMirrors"}; !slices.Equal(got, want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	lv, _ := f.LV(vg, "pvc-1")
	if !lv.Active || lv.HasTag("carve.dev/held") || !lv.HasTag("carve.dev/mirrors=2") {
		t.Errorf("published volume after modify: %+v", lv)
	}
}

// TestModifyRefusals: what the volume cannot take, and what the VG cannot
// place, changes nothing.
func TestModifyRefusals(t *testing.T) {
	m, f := newManager(t)
	f.PutThinPool(vg, "pool", 40*mib, 0)
	thin, err := m.CreateVolume(ctx, volume.CreateRequest{Name: "thin", VG: vg, RequiredBytes: 4 * mib, ParamsDigest: "p", Type: volume.Type{ThinPool: "pool"}})
	if err != nil {
		t.Fatal(err)
	}
	thick, _ := m.CreateVolume(ctx, req("thick", 8*mib))
	f.SetPVCount(vg, 2)
	striped, err := m.CreateVolume(ctx, volume.CreateRequest{Name: "striped", VG: vg, RequiredBytes: 8 * mib, ParamsDigest: "p", Type: volume.Type{Stripes: 2}})
	if err != nil {
		t.Fatal(err)
	}
	f.SetPVCount(vg, 3)
	raid5, err := m.CreateVolume(ctx, volume.CreateRequest{Name: "raid5", VG: vg, RequiredBytes: 8 * mib, ParamsDigest: "p",
		Type: volume.Type{RAID: "raid5", Stripes: 2}})
	if err != nil {
		t.Fatal(err)
	}
	integrity, err := m.CreateVolume(ctx, volume.CreateRequest{Name: "integrity", VG: vg, RequiredBytes: 4 * mib, ParamsDigest: "p",
		Type: volume.Type{Mirrors: 1, Integrity: true}})
	if err != nil {
		t.Fatal(err)
	}
	for name, tags := range map[string][]string{"raid5": {"carve.dev/raid=raid5", "carve.dev/stripes=2"},
		"integrity": {"carve.dev/integrity", "carve.dev/mirrors=1"}} {
		lv, _ := f.LV(vg, volume.LVName(name))
		for _, tag := range tags {
			if !lv.HasTag(tag) {
				t.Errorf("%s: tags %v lack %s", name, lv.Tags, tag)
			}
		}
	}
	f.SetPVCount(vg, 2)
	n := len(f.Calls)
	for _, tc := range []struct {
		what string
		id   volume.ID
		want int
		code codes.Code
	}{
		{"thin gets legs", thin.ID, 1, codes.InvalidArgument},
		{"striped gets legs", striped.ID, 1, codes.InvalidArgument},
		{"raid5 gets legs", raid5.ID, 1, codes.InvalidArgument},
		{"raid1 with integrity turns linear", integrity.ID, 0, codes.InvalidArgument},
		{"3 legs on 2 PVs", thick.ID, 2, codes.ResourceExhausted},
		{"unknown volume", volume.ID{Node: node, VG: vg, LV: "nope"}, 1, codes.NotFound},
		{"another node's", volume.ID{Node: "elsewhere", VG: vg, LV: "thick"}, 1, codes.NotFound},
	} {
		if _, err := m.ModifyVolume(ctx, tc.id, mirrors(tc.want)); volume.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.what, err, tc.code)
		}
	}
	for _, v := range []volume.Volume{thin, striped, raid5} {
		if _, err := m.ModifyVolume(ctx, v.ID, mirrors(0)); err != nil {
			t.Errorf("0 mirrors of %s, what it has: %v", v.ID.LV, err)
		}
	}
	if got := changes(f, n); len(got) != 0 {
		t.Errorf("refusals changed %v", got)
	}
}

// TestModifyConvergesAfterCrash: a conversion cut after each of its
// changing steps is finished by the retry, which leaves the volume as an
// uninterrupted one would.
func TestModifyConvergesAfterCrash(t *testing.T) {
	for _, step := range []string{"ChangeTags", "Activate", "ConvertMirrors", "Deactivate", "RemoveTags"} {
		t.Run(step, func(t *testing.T) {
			m, f := newManager(t)
			f.SetPVCount(vg, 2)
			v, _ := m.CreateVolume(ctx, req("pvc-1", 8*mib))
			crash := errors.New("crash")
			f.Fail = func(call string) error {
				if call == step {
					return crash
				}
				return nil
			}
			if _, err := m.ModifyVolume(ctx, v.ID, mirrors(1)); !errors.Is(err, crash) {
				t.Fatalf("modify with a crash at %s: %v", step, err)
			}
			f.Fail = nil
			if _, err := m.ModifyVolume(ctx, v.ID, mirrors(1)); err != nil {
				t.Fatalf("retry: %v", err)
			}
			lv, _ := f.LV(vg, "pvc-1")
			all, _ := f.ListAllLVs(ctx, lvm.Fresh, vg)
			if lvm.Mirrors(all, "pvc-1") != 1 || !lv.HasTag("carve.dev/mirrors=1") || lv.Active || lv.HasTag("carve.dev/held") {
				t.Errorf("after the retry: mirrors %d, LV %+v", lvm.Mirrors(all, "pvc-1"), lv)
			}
			n := len(f.Calls)
			if _, err := m.ModifyVolume(ctx, v.ID, mirrors(1)); err != nil || len(changes(f, n)) != 0 {
				t.Errorf("a third call: %v, changes %v", err, changes(f, n))
			}
		})
	}
}

// TestModifyWaitsForSync: a call whose time runs out while the legs sync
// says how far they are (ABORTED); once in sync, the retry succeeds
// without converting again.
func TestModifyWaitsForSync(t *testing.T) {
	m, f := newManager(t)
	f.SetPVCount(vg, 2)
	v, _ := m.CreateVolume(ctx, req("pvc-1", 8*mib))
	if _, err := m.PublishVolume(ctx, v.ID, node); err != nil {
		t.Fatal(err)
	}
	f.ConvertSync = 40
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := m.ModifyVolume(short, v.ID, mirrors(1))
	if !errors.Is(err, volume.ErrDataPending) || volume.CodeOf(err) != codes.Aborted || !strings.Contains(err.Error(), "40%") {
		t.Fatalf("modify while the legs sync: %v, want ABORTED at 40%%", err)
	}
	f.SetSync(vg, "pvc-1", 100)
	n := len(f.Calls)
	if _, err := m.ModifyVolume(ctx, v.ID, mirrors(1)); err != nil || len(changes(f, n)) != 0 {
		t.Errorf("retry once in sync: %v, changes %v", err, changes(f, n))
	}
}

func u64(n uint64) *uint64 { return &n }

// TestModifyLimits: IO limits are recorded in the LV's tags, the ones
// named replacing theirs and the others kept; the node's applier runs for
// a published volume only, also when the tags were already right (a
// retry after a crash between the two); the volume reads them back; 0
// lifts a limit and drops its tag; a volume made with limits has them.
func TestModifyLimits(t *testing.T) {
	f := lvmfake.New(100*mib, vg)
	var applied []volume.ID
	var applyErr error
	m := managerOn(f, lvmvol.Config{ApplyLimits: func(_ context.Context, id volume.ID) error { applied = append(applied, id); return applyErr }})
	r := req("pvc-1", 8*mib)
	r.Limits = volume.IOLimits{ReadIOPS: 100}
	v, err := m.CreateVolume(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if v.Limits != r.Limits {
		t.Fatalf("created with %+v, reads %+v", r.Limits, v.Limits)
	}
	if v, err = m.ModifyVolume(ctx, v.ID, volume.Mutable{WriteBPS: u64(1 << 20)}); err != nil {
		t.Fatal(err)
	}
	if want := (volume.IOLimits{WriteBPS: 1 << 20, ReadIOPS: 100}); v.Limits != want || len(applied) != 0 {
		t.Errorf("unpublished: limits %+v, applied to %v; want %+v, applied to none", v.Limits, applied, want)
	}
	if _, err := m.PublishVolume(ctx, v.ID, v.ID.Node); err != nil {
		t.Fatal(err)
	}
	n := len(f.Calls)
	for range 2 {
		if v, err = m.ModifyVolume(ctx, v.ID, volume.Mutable{WriteBPS: u64(2 << 20), ReadIOPS: u64(0)}); err != nil {
			t.Fatal(err)
		}
	}
	lv, _ := f.LV(vg, "pvc-1")
	if want := (volume.IOLimits{WriteBPS: 2 << 20}); v.Limits != want || !lv.HasTag("carve.dev/wbps=2097152") ||
		lv.HasTag("carve.dev/wbps=1048576") || slices.ContainsFunc(lv.Tags, func(t string) bool { return strings.HasPrefix(t, "carve.dev/riops=") }) {
		t.Errorf("published: limits %+v, tags %v; want %+v", v.Limits, lv.Tags, want)
	}
	if got := changes(f, n); !slices.Equal(got, []string{"ChangeTags"}) {
		t.Errorf("changes of the same modify twice: %v, want one ChangeTags", got)
	}
	if len(applied) != 2 || applied[0] != v.ID {
		t.Errorf("applied to %v, want %v twice", applied, v.ID)
	}
	applyErr = errors.New("no cgroup")
	if _, err := m.ModifyVolume(ctx, v.ID, volume.Mutable{WriteBPS: u64(2 << 20)}); err == nil || !strings.Contains(err.Error(), "no cgroup") {
		t.Errorf("modify with a failing applier: %v", err)
	}
}
