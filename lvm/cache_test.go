package lvm

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// reportRunner answers lvm's report commands with recorded output of VG
// carve-thin and every other command with success, and counts what ran by
// subcommand. duringReport, when set, runs while lvs reports.
type reportRunner struct {
	t            *testing.T
	mu           sync.Mutex
	ran          map[string]int
	duringReport func()
	fail         error // every report fails with it, when set
}

func (r *reportRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.mu.Lock()
	r.ran[args[0]]++
	hook, fail := r.duringReport, r.fail
	r.mu.Unlock()
	if fail != nil && (args[0] == "lvs" || args[0] == "vgs" || args[0] == "pvs") {
		return nil, fail
	}
	switch args[0] {
	case "lvs":
		if hook != nil {
			hook()
		}
		return fixture(r.t, "thin-lvs-all.json"), nil
	case "vgs":
		return fixture(r.t, "thin-vg.json"), nil
	case "pvs":
		return fixture(r.t, "empty-pvs.json"), nil
	}
	return nil, nil
}

func (r *reportRunner) count(sub string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ran[sub]
}

func newCacheUnderTest(t *testing.T) (*Cache, *reportRunner, *time.Time) {
	r := &reportRunner{t: t, ran: map[string]int{}}
	x := NewCache(New(r), time.Minute)
	now := time.Unix(1000, 0)
	x.now = func() time.Time { return now }
	return x, r, &now
}

func TestCachedReadsRunLVMOncePerReport(t *testing.T) {
	x, r, _ := newCacheUnderTest(t)
	for range 3 {
		if _, err := x.ListLVs(ctx, Cached, "carve-thin"); err != nil {
			t.Fatal(err)
		}
		if _, err := x.GetLV(ctx, Cached, "carve-thin", "thin1"); err != nil {
			t.Fatal(err)
		}
		if _, err := x.GetVG(ctx, Cached, "carve-thin"); err != nil {
			t.Fatal(err)
		}
		if _, err := x.ListVGPVs(ctx, Cached, "carve-thin"); err != nil {
			t.Fatal(err)
		}
	}
	if r.count("lvs") != 1 || r.count("vgs") != 1 || r.count("pvs") != 1 {
		t.Errorf("ran %v, want one lvs, vgs and pvs for three rounds of queries", r.ran)
	}
}

func TestCachedLVsAnswerLikeLVM(t *testing.T) {
	x, _, _ := newCacheUnderTest(t)
	visible, err := x.ListLVs(ctx, Cached, "carve-thin")
	if err != nil {
		t.Fatal(err)
	}
	for _, lv := range visible {
		if lv.Hidden {
			t.Errorf("ListLVs gave hidden %s", lv.Name)
		}
	}
	all, _ := x.ListAllLVs(ctx, Cached, "carve-thin")
	if len(visible) != 4 || len(all) != 7 {
		t.Errorf("visible %d, all %d; want 4 and 7 as in the report", len(visible), len(all))
	}
	// Internal LVs carry reserved names, which GetLV refuses before lvm2
	// or the report is asked.
	if _, err := x.GetLV(ctx, Cached, "carve-thin", "pool0_tdata"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("internal LV by name: %v, want ErrInvalidName", err)
	}
	if _, err := x.GetLV(ctx, Cached, "carve-thin", "nosuch"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing LV: %v, want ErrNotFound", err)
	}
	if _, err := x.GetLV(ctx, Cached, "carve-thin", "bad/name"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name: %v, want ErrInvalidName", err)
	}
	// Callers get copies: changing one does not change the next answer.
	visible[0].Tags = append(visible[0].Tags[:0], "mutated")
	again, _ := x.GetLV(ctx, Cached, "carve-thin", visible[0].Name)
	if len(again.Tags) > 0 && again.Tags[0] == "mutated" {
		t.Error("a caller's change reached the cache")
	}
}

func TestReadsWithoutTheMarkRunLVM(t *testing.T) {
	x, r, _ := newCacheUnderTest(t)
	ctx := context.Background()
	for range 2 {
		_, _ = x.ListLVs(ctx, Cached, "carve-thin")
		_, _ = x.ListLVs(ctx, Fresh, "carve-thin")
		_, _ = x.GetLV(ctx, Fresh, "carve-thin", "thin1")
	}
	// The marked read is answered from the report the first one left.
	if got := r.count("lvs"); got != 5 {
		t.Errorf("lvs ran %d times, want 5: every unmarked read runs lvm2", got)
	}
}

func TestEveryChangeInvalidatesItsVG(t *testing.T) {
	ctx := context.Background()
	changes := map[string]func(x *Cache) error{
		"CreateLV": func(x *Cache) error {
			_, err := x.CreateLV(ctx, CreateLVOptions{VG: "carve-thin", Name: "n", Size: 1 << 20})
			return err
		},
		"RemoveLV":   func(x *Cache) error { return x.RemoveLV(ctx, "carve-thin", "thin1") },
		"ExtendLV":   func(x *Cache) error { return x.ExtendLV(ctx, "carve-thin", "thin1", 1<<30) },
		"Activate":   func(x *Cache) error { return x.Activate(ctx, "carve-thin", "thin1") },
		"Deactivate": func(x *Cache) error { return x.Deactivate(ctx, "carve-thin", "thin1") },
		"AddTags":    func(x *Cache) error { return x.AddTags(ctx, "carve-thin", "thin1", "a") },
		"RemoveTags": func(x *Cache) error { return x.RemoveTags(ctx, "carve-thin", "thin1", "a") },
		"CreateThinSnapshot": func(x *Cache) error {
			_, err := x.CreateThinSnapshot(ctx, "carve-thin", "thin1", "s")
			return err
		},
		"CreateCOWSnapshot": func(x *Cache) error {
			_, err := x.CreateCOWSnapshot(ctx, "carve-thin", "thin1", "s", 1<<20)
			return err
		},
		"CreateThinPool": func(x *Cache) error {
			_, err := x.CreateThinPool(ctx, "carve-thin", "p", 1<<30)
			return err
		},
		"CreateSnapshotOf": func(x *Cache) error {
			_, err := x.CreateSnapshotOf(ctx, LV{VGName: "carve-thin", Name: "thin1", Attr: "Vwi-a-tz--"}, "s", SnapshotOptions{SkipReadBack: true})
			return err
		},
		"RemoveLVOf": func(x *Cache) error { return x.RemoveLVOf(ctx, LV{VGName: "carve-thin", Name: "thin1"}) },
		"RetagAndActivate": func(x *Cache) error {
			return x.RetagAndActivate(ctx, "carve-thin", "thin1", []string{"a"}, nil, true)
		},
		"CreateCacheVol": func(x *Cache) error {
			return x.CreateCacheVol(ctx, "carve-thin", "thin1_wcache", 1<<20, 1<<20, []string{"@fast"}, nil)
		},
		"AttachWriteCache": func(x *Cache) error { return x.AttachWriteCache(ctx, "carve-thin", "thin1", "thin1_wcache") },
		"SplitCache":       func(x *Cache) error { return x.SplitCache(ctx, "carve-thin", "thin1") },
		"Invalidate":       func(x *Cache) error { x.Invalidate("carve-thin"); return nil },
		"ThinAllocated": func(x *Cache) error {
			return x.ThinAllocated(ctx, "carve-thin", "thin1", 0, func(Range) error { return nil })
		},
		"ThinDelta": func(x *Cache) error {
			return x.ThinDelta(ctx, "carve-thin", "thin1", "thin2", 0, func(Range) error { return nil })
		},
		"CreateVGOnBlank": func(x *Cache) error { return x.CreateVGOnBlank(ctx, "carve-thin", "/dev/vdx") },
		"ExtendVGOnBlank": func(x *Cache) error { return x.ExtendVGOnBlank(ctx, "carve-thin", "/dev/vdx") },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			x, r, _ := newCacheUnderTest(t)
			_, _ = x.GetVG(ctx, Cached, "carve-thin")
			_, _ = x.ListVGPVs(ctx, Cached, "carve-thin")
			_, _ = x.ListLVs(ctx, Cached, "carve-thin")
			before := map[string]int{"lvs": r.count("lvs"), "vgs": r.count("vgs"), "pvs": r.count("pvs")}
			_ = change(x) // the fake's answers may not parse as a change's result: only the effect matters
			after := map[string]int{"lvs": r.count("lvs"), "vgs": r.count("vgs"), "pvs": r.count("pvs")}
			_, _ = x.GetVG(ctx, Cached, "carve-thin")
			_, _ = x.ListVGPVs(ctx, Cached, "carve-thin")
			_, _ = x.ListLVs(ctx, Cached, "carve-thin")
			for _, sub := range []string{"lvs", "vgs", "pvs"} {
				if got := r.count(sub) - after[sub]; got != 1 {
					t.Errorf("%s after %s ran %d times (before: %d), want 1: the cached report survived the change", sub, name, got, before[sub])
				}
			}
		})
	}
}

func TestAChangeDuringAReadKeepsItsReportOut(t *testing.T) {
	x, r, _ := newCacheUnderTest(t)
	// The change lands while lvs runs: the report may predate it.
	r.duringReport = func() {
		r.duringReport = nil
		_ = x.AddTags(context.Background(), "carve-thin", "thin1", "t")
	}
	_, _ = x.ListLVs(ctx, Cached, "carve-thin")
	_, _ = x.ListLVs(ctx, Cached, "carve-thin")
	if got := r.count("lvs"); got != 2 {
		t.Errorf("lvs ran %d times, want 2: a report read across a change must not be kept", got)
	}
}

func TestReportsExpire(t *testing.T) {
	x, r, now := newCacheUnderTest(t)
	_, _ = x.GetVG(ctx, Cached, "carve-thin")
	*now = now.Add(59 * time.Second)
	_, _ = x.GetVG(ctx, Cached, "carve-thin")
	if r.count("vgs") != 1 {
		t.Fatalf("vgs ran %d times within MaxAge, want 1", r.count("vgs"))
	}
	*now = now.Add(time.Second)
	_, _ = x.GetVG(ctx, Cached, "carve-thin")
	if r.count("vgs") != 2 {
		t.Errorf("vgs ran %d times after MaxAge, want 2", r.count("vgs"))
	}
	x.MaxAge = 0
	_, _ = x.GetVG(ctx, Cached, "carve-thin")
	_, _ = x.GetVG(ctx, Cached, "carve-thin")
	if r.count("vgs") != 4 {
		t.Errorf("vgs ran %d times with caching off, want 4", r.count("vgs"))
	}
}

func TestFailedReadsAreNotKept(t *testing.T) {
	x, r, _ := newCacheUnderTest(t)
	if _, err := x.GetVG(ctx, Cached, "other"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetVG of a VG the report lacks: %v", err)
	}
	_, _ = x.GetVG(ctx, Cached, "other")
	if r.count("vgs") != 2 {
		t.Errorf("vgs ran %d times, want 2: a failed read is asked again", r.count("vgs"))
	}
}

// Shared reads: one lvs for the operation's questions, again after a
// change it makes, never a report older than the operation; what it read
// serves the queries after it.
func TestSharedReadsRunLVMOncePerOperation(t *testing.T) {
	x, r, now := newCacheUnderTest(t)
	_, _ = x.GetLV(ctx, Cached, "carve-thin", "thin1") // a report older than the operation
	op := Shared()
	for _, name := range []string{"thin1", "pool0", "thin1"} {
		if _, err := x.GetLV(ctx, op, "carve-thin", name); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.count("lvs"); got != 2 {
		t.Errorf("lvs ran %d times, want 2: the query's, then one for the operation (not the query's report)", got)
	}
	// Each report on its own: the VG's, read by a query before, is read
	// again for the operation although its lvs was.
	_, _ = x.GetVG(ctx, Cached, "carve-thin")
	_, _ = x.GetVG(ctx, op, "carve-thin")
	_, _ = x.GetVG(ctx, op, "carve-thin")
	if got := r.count("vgs"); got != 2 {
		t.Errorf("vgs ran %d times, want 2: the query's and the operation's", got)
	}
	if err := x.Activate(ctx, "carve-thin", "thin1"); err != nil {
		t.Fatal(err)
	}
	_, _ = x.GetLV(ctx, op, "carve-thin", "thin1")
	_, _ = x.GetLV(ctx, op, "carve-thin", "pool0")
	if got := r.count("lvs"); got != 3 {
		t.Errorf("lvs ran %d times, want 3: once more after the operation's change", got)
	}
	*now = now.Add(time.Second)
	_, _ = x.GetLV(ctx, Cached, "carve-thin", "thin1")
	if got := r.count("lvs"); got != 3 {
		t.Errorf("lvs ran %d times, want 3: a query reuses the operation's report", got)
	}
	_, _ = x.GetLV(ctx, Shared(), "carve-thin", "thin1")
	if got := r.count("lvs"); got != 4 {
		t.Errorf("lvs ran %d times, want 4: another operation reads afresh", got)
	}
	x.MaxAge = 0
	_, _ = x.GetLV(ctx, op, "carve-thin", "thin1")
	_, _ = x.GetLV(ctx, op, "carve-thin", "thin1")
	if got := r.count("lvs"); got != 6 {
		t.Errorf("lvs ran %d times, want 6: with caching off every read runs lvm2", got)
	}
}

// TestAFailedFreshReadIsNewerThanTheCache: once a fresh read fails (the
// VG's disks vanished, a health probe found out), queries stop answering
// from the report read before and ask lvm2, which fails them too.
func TestAFailedFreshReadIsNewerThanTheCache(t *testing.T) {
	for name, fresh := range map[string]func(x *Cache) error{
		"GetLV": func(x *Cache) error {
			_, err := x.GetLV(context.Background(), Fresh, "carve-thin", "thin1")
			return err
		},
		"GetVG": func(x *Cache) error { _, err := x.GetVG(context.Background(), Fresh, "carve-thin"); return err },
	} {
		t.Run(name, func(t *testing.T) {
			x, r, _ := newCacheUnderTest(t)
			if _, err := x.GetLV(ctx, Cached, "carve-thin", "thin1"); err != nil {
				t.Fatal(err)
			}
			r.mu.Lock()
			r.fail = errors.New("exit status 5: Volume group \"carve-thin\" not found")
			r.mu.Unlock()
			if err := fresh(x); err == nil {
				t.Fatal("the fresh read did not fail")
			}
			before := r.count("lvs")
			if _, err := x.GetLV(ctx, Cached, "carve-thin", "thin1"); err == nil {
				t.Errorf("a query after a failed fresh read answered from the report before it")
			}
			if r.count("lvs") != before+1 {
				t.Errorf("the query ran lvs %d times, want once", r.count("lvs")-before)
			}
		})
	}
}

// TestACancelledReadKeepsTheCache: a read cut by its caller's context says
// nothing of lvm2, so the report stays.
func TestACancelledReadKeepsTheCache(t *testing.T) {
	x, r, _ := newCacheUnderTest(t)
	if _, err := x.GetLV(ctx, Cached, "carve-thin", "thin1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.mu.Lock()
	r.fail = context.Canceled
	r.mu.Unlock()
	_, _ = x.GetLV(ctx, Fresh, "carve-thin", "thin1")
	before := r.count("lvs")
	if _, err := x.GetLV(ctx, Cached, "carve-thin", "thin1"); err != nil || r.count("lvs") != before {
		t.Errorf("query after a cancelled read: %v, %d lvs runs; want the cached answer", err, r.count("lvs")-before)
	}
}

// Alive: a command of the VG that succeeded (a report lvm2 ran, or a
// change) within the window; answers from the cache and failures prove
// nothing.
func TestAliveAfterSuccessfulCommandsOnly(t *testing.T) {
	x, r, now := newCacheUnderTest(t)
	if x.Alive("carve-thin", time.Minute) {
		t.Fatal("alive before any command")
	}
	r.fail = errors.New("vgs: device vanished")
	_, _ = x.GetVG(ctx, Cached, "carve-thin")
	if x.Alive("carve-thin", time.Minute) {
		t.Fatal("alive after a failed report")
	}
	r.fail = nil
	_, _ = x.GetVG(ctx, Cached, "carve-thin")
	if !x.Alive("carve-thin", 30*time.Second) || x.Alive("other", 30*time.Second) {
		t.Fatal("a report of carve-thin proves it, and only it, alive")
	}
	*now = now.Add(30 * time.Second)
	_, _ = x.GetVG(ctx, Cached, "carve-thin") // from the cache: runs nothing
	if r.count("vgs") != 2 || x.Alive("carve-thin", 30*time.Second) {
		t.Fatalf("vgs ran %d times; a cached answer kept the VG alive", r.count("vgs"))
	}
	if err := x.AddTags(context.Background(), "carve-thin", "thin1", "t"); err != nil {
		t.Fatal(err)
	}
	if !x.Alive("carve-thin", time.Second) {
		t.Error("a successful change does not prove the VG alive")
	}
}

// fakePrints is a metadata print the test moves by hand, counting reads.
type fakePrints struct {
	mu    sync.Mutex
	print string
	err   error
	reads int
}

func (f *fakePrints) read(s printScope) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.print + " of " + s.pvs[0], f.err
}

func (f *fakePrints) set(p string, err error) {
	f.mu.Lock()
	f.print, f.err = p, err
	f.mu.Unlock()
}

func TestAMovedMetadataPrintEndsTheReports(t *testing.T) {
	x, r, now := newCacheUnderTest(t)
	prints := &fakePrints{print: "seqno 1"}
	x.print = prints.read
	x.notePVs("carve-thin", []PV{{Name: "/dev/vdz"}})
	query := func() {
		t.Helper()
		if _, err := x.ListLVs(ctx, Cached, "carve-thin"); err != nil {
			t.Fatal(err)
		}
	}
	query()
	*now = now.Add(2 * printEvery)
	query()
	if r.count("lvs") != 1 {
		t.Fatalf("lvs ran %d times with the metadata unchanged, want 1", r.count("lvs"))
	}
	// Changed outside the cache (lvcreate by hand, dmeventd's lvextend):
	// the next query past printEvery reads again.
	prints.set("seqno 2", nil)
	query()
	if r.count("lvs") != 1 {
		t.Errorf("lvs ran again within printEvery of the last comparison")
	}
	*now = now.Add(printEvery)
	query()
	if r.count("lvs") != 2 {
		t.Errorf("lvs ran %d times after the metadata moved, want 2", r.count("lvs"))
	}
	// The new report's generation began with the new print: it stays.
	*now = now.Add(printEvery)
	query()
	if r.count("lvs") != 2 {
		t.Errorf("lvs ran %d times with the new print unchanged, want 2", r.count("lvs"))
	}
	// Headers that cannot be read any more: the disks tell, so read.
	prints.set("", errors.New("no such device"))
	*now = now.Add(printEvery)
	query()
	if r.count("lvs") != 3 {
		t.Errorf("lvs ran %d times once the print could not be read, want 3", r.count("lvs"))
	}
}

func TestWithoutAPrintReportsLiveOutMaxAge(t *testing.T) {
	x, r, now := newCacheUnderTest(t)
	prints := &fakePrints{err: errors.New("not readable here")}
	x.print = prints.read
	x.notePVs("carve-thin", []PV{{Name: "/dev/vdz"}})
	for range 3 {
		if _, err := x.ListLVs(ctx, Cached, "carve-thin"); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(2 * printEvery)
	}
	if r.count("lvs") != 1 {
		t.Errorf("lvs ran %d times, want 1: a print that never reads turns the check off", r.count("lvs"))
	}
	if prints.reads != 1 {
		t.Errorf("the print was read %d times, want once (the generation's base)", prints.reads)
	}
}
