package soakmodel

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// vol is a driver's volume, as both drivers make theirs: Volume and
// what only the driver knows.
type vol struct{ Volume }

var (
	thick   = &Layout{Name: "thick", Segtype: "linear"}
	thin    = &Layout{Name: "thin", Segtype: "thin"}
	striped = &Layout{Name: "striped", Segtype: "striped"}
	raid1   = &Layout{Name: "raid1", Segtype: "raid1"}
)

const mib = 1 << 20

// recorder is a Checker whose failures are kept.
func recorder() (*Checker, *[]string) {
	var failed []string
	return &Checker{Fail: func(msg string) { failed = append(failed, msg) }, Stats: NewStats()}, &failed
}

func TestWritesReadBackOrFail(t *testing.T) {
	acked := Writes{}
	a, b := SumOf([]byte("first")), SumOf([]byte("second"))
	acked["f1"], acked["f2"] = a, b
	for name, c := range map[string]struct {
		read  map[string]Sum
		exact bool
		want  string // "" must pass
	}{
		"as written":                {map[string]Sum{"f1": a, "f2": b}, true, ""},
		"more, not exact":           {map[string]Sum{"f1": a, "f2": b, "f3": a}, false, ""},
		"more, exact":               {map[string]Sum{"f1": a, "f2": b, "f3": a}, true, "file f3 is no acknowledged write"},
		"lost":                      {map[string]Sum{"f1": a}, false, "file f2 of an acknowledged write is gone"},
		"changed":                   {map[string]Sum{"f1": a, "f2": a}, false, "file f2 reads back as " + a.String()},
		"same digest, another size": {map[string]Sum{"f1": a, "f2": {b.SHA256, 1}}, false, "file f2 reads back"},
	} {
		c1, failed := recorder()
		c1.Read("volume v", acked, c.read, c.exact)
		switch {
		case c.want == "" && len(*failed) != 0:
			t.Errorf("%s: failed %q", name, *failed)
		case c.want != "" && (len(*failed) != 1 || !strings.Contains((*failed)[0], c.want)):
			t.Errorf("%s: failed %q, want one failure saying %q", name, *failed, c.want)
		}
		if c1.Stats.read != 2 {
			t.Errorf("%s: %d files checked, want 2", name, c1.Stats.read)
		}
	}
}

func TestLearnNeverChangesAnAcknowledgedWrite(t *testing.T) {
	w := Writes{}
	a, b := SumOf([]byte("a")), SumOf([]byte("b"))
	if !w.Learn("x", a) || w.Learn("x", b) || w["x"] != a {
		t.Fatalf("learnt %v", w)
	}
	if _, problems := w.Check("log line of", map[string]Sum{"x": b}, false); len(problems) != 1 {
		t.Errorf("a log that changed an acknowledged line: problems %q", problems)
	}
	c := w.Clone()
	c["y"] = b
	if w.Count() != 1 || c.Count() != 2 || c.Bytes() != 2 {
		t.Errorf("clone shares its map: %v, %v", w, c)
	}
}

// TestSnapshotsAndRestoresHoldTheirWrites: a snapshot holds the writes
// acknowledged before it, not after; a restore holds the snapshot's.
func TestSnapshotsAndRestoresHoldTheirWrites(t *testing.T) {
	m := &Model[*vol]{}
	v := &vol{Volume: Volume{Name: m.Next("v"), Layout: thin, Size: 64 * mib, Writes: Writes{}}}
	m.Add(v)
	v.Writes["f1"] = SumOf([]byte("1"))
	sn := NewSnapshot(m.Next("s"), &v.Volume)
	m.AddSnapshot(sn)
	v.Writes["f2"] = SumOf([]byte("2"))
	r := &vol{Volume: sn.Restore(m.Next("r"), thick, sn.Size)}
	m.Add(r)
	if sn.Writes.Count() != 1 || r.Writes.Count() != 1 || v.Writes.Count() != 2 {
		t.Errorf("snapshot %v, restore %v, source %v", sn.Writes, r.Writes, v.Writes)
	}
	c, failed := recorder()
	c.Read(r.Name, r.Writes, map[string]Sum{"f1": SumOf([]byte("1")), "f2": SumOf([]byte("2"))}, true)
	if len(*failed) != 1 {
		t.Errorf("a restore holding a write made after its snapshot: %q", *failed)
	}
	if names := []string{v.Name, sn.Name, r.Name}; names[0] != "v-1" || names[1] != "s-2" || names[2] != "r-3" {
		t.Errorf("names %v", names)
	}
	v.Busy = true
	if idle := m.Idle(func(*vol) bool { return true }); len(idle) != 1 || idle[0] != r {
		t.Errorf("idle %v", idle)
	}
	m.Remove(v)
	m.RemoveSnapshot(sn)
	if len(m.Volumes) != 1 || len(m.Snapshots) != 0 || m.HoldsThin() {
		t.Errorf("after removes: %v %v", m.Volumes, m.Snapshots)
	}
}

// TestVolumesKeepTheirNode: a volume records the node it was placed on;
// its snapshots stay there, restores go there or, across nodes, to the
// node asked for, with the snapshot's writes either way; a move takes
// its writes to the other node as a new, detached volume; each node's
// part of the model says that node's LVs and free space alone.
func TestVolumesKeepTheirNode(t *testing.T) {
	const extent = 4 * mib
	nodes := []string{"a", "b"}
	m := &Model[*vol]{}
	v := &vol{Volume: Volume{Name: m.Next("v"), LV: "lv1", Layout: thick, Node: "a", Size: 8 * mib, Writes: Writes{"f1": SumOf([]byte("1"))}, Attached: true}}
	m.Add(v)
	sn := NewSnapshot(m.Next("s"), &v.Volume)
	sn.LV, sn.Size = "snap1", 8*mib
	m.AddSnapshot(sn)
	here, there := sn.Restore("here", thick, 8*mib), sn.RestoreOn("there", thick, 8*mib, Other(nodes, sn.Node))
	if sn.Node != "a" || here.Node != "a" || there.Node != "b" || there.Writes.Count() != 1 {
		t.Fatalf("snapshot on %q, restores on %q and %q with %v", sn.Node, here.Node, there.Node, there.Writes)
	}
	v.Moved("b", "lv2", "b/vg/lv2")
	if v.Node != "b" || v.LV != "lv2" || v.ID != "b/vg/lv2" || v.Attached || v.Writes.Count() != 1 || sn.Node != "a" {
		t.Errorf("moved: %+v; its snapshot on %q", v.Volume, sn.Node)
	}
	onA, onB := m.On("a"), m.On("b")
	if lvs := onA.WantLVs(extent); len(lvs) != 1 || lvs["snap1"].Size != 8*mib || onA.ThickUse(extent) != 8*mib {
		t.Errorf("node a holds the snapshot alone: %v, %d bytes", lvs, onA.ThickUse(extent))
	}
	if lvs := onB.WantLVs(extent); len(lvs) != 1 || lvs["lv2"].Active || onB.HoldsThin() {
		t.Errorf("node b holds the moved volume alone, inactive: %v", lvs)
	}
	onB.Add(&vol{Volume: Volume{Name: "x", Node: "b"}})
	if len(m.Volumes) != 1 {
		t.Error("a node's view adds to the model")
	}
}

// TestOnlyPlacedIdleVolumesMove: a volume may move when no operation
// holds it, its LV is known (bound) and it is on one of two or more
// nodes; Other goes round the nodes and finds nowhere to go from a node
// unknown or alone.
func TestOnlyPlacedIdleVolumesMove(t *testing.T) {
	nodes := []string{"a", "b", "c"}
	for node, want := range map[string]string{"a": "b", "b": "c", "c": "a", "": "", "d": ""} {
		if got := Other(nodes, node); got != want {
			t.Errorf("Other(%v, %q) = %q, want %q", nodes, node, got, want)
		}
	}
	if got := Other([]string{"a"}, "a"); got != "" {
		t.Errorf("one node: Other = %q", got)
	}
	m := &Model[*vol]{}
	for _, v := range []Volume{
		{Name: "bound", LV: "lv", Node: "a"},
		{Name: "unbound", Node: "a"},
		{Name: "busy", LV: "lv", Node: "a", Busy: true},
		{Name: "standalone", LV: "lv"},
		{Name: "refused", LV: "lv", Node: "b"},
	} {
		m.Add(&vol{Volume: v})
	}
	got := m.Movable(nodes, func(v *vol) bool { return v.Name != "refused" })
	if len(got) != 1 || got[0].Name != "bound" {
		t.Errorf("movable: %v", got)
	}
	if got := m.Movable([]string{"a"}, func(*vol) bool { return true }); len(got) != 0 {
		t.Errorf("movable with one node: %v", got)
	}
}

// TestModelSaysLVsAndFreeSpace: the LVs and the VG's free space the
// model implies, and the checks of what was read against them, which
// pass on the model's own and fail on a leak, a size or an activation
// that differs.
func TestModelSaysLVsAndFreeSpace(t *testing.T) {
	const extent = 4 * mib
	m := &Model[*vol]{}
	for i, l := range []*Layout{thick, thin, striped, raid1} {
		m.Add(&vol{Volume: Volume{Name: l.Name, LV: "lv" + l.Name, Layout: l, Size: 10 * mib, Attached: i == 0}})
	}
	m.AddSnapshot(&Snapshot{Name: "s", LV: "snap", Layout: raid1, Size: 12 * mib})
	m.AddSnapshot(&Snapshot{Name: "pending", Layout: thick}) // not ready: no LV yet
	want := m.WantLVs(extent)
	if got := want["lvstriped"]; got != (LVState{"striped", 16 * mib, false}) {
		t.Errorf("striped: %v", got)
	}
	if got := want["snap"]; got != (LVState{"linear", 12 * mib, false}) || len(want) != 5 {
		t.Errorf("LVs %v", want)
	}
	// thick 12, thin 0, striped 16, raid1 2*(12+4), the thick snapshot 12
	if use := m.ThickUse(extent); use != 72*mib {
		t.Errorf("thick use %d MiB, want 72", use/mib)
	}
	c, failed := recorder()
	if !Same(c, "LVs", want, m.WantLVs(extent)) || len(*failed) != 0 {
		t.Fatalf("the model against itself: %q", *failed)
	}
	got := m.WantLVs(extent)
	got["lvthick"] = LVState{"linear", 12 * mib, false}
	got["leaked"] = LVState{"linear", 4 * mib, false}
	delete(got, "snap")
	if Same(c, "LVs", got, want) || len(*failed) != 1 || c.Stats.Leaked() != 1 {
		t.Fatalf("failed %q, %d leaks", *failed, c.Stats.Leaked())
	}
	for _, s := range []string{"lvthick: have linear 12582912 active=false, want linear 12582912 active=true", "leaked: have", "snap: missing"} {
		if !strings.Contains((*failed)[0], s) {
			t.Errorf("%q does not say %q", (*failed)[0], s)
		}
	}
	c.Ending = true
	Same(c, "LVs", got, want)
	if c.Stats.Leaked() != 3 {
		t.Errorf("at the end every difference is a leak: %d", c.Stats.Leaked())
	}
	c, failed = recorder()
	c.Free("vg", 1000*mib, m.ThickUse(extent), 928*mib)
	c.Free("vg", 1000*mib, m.ThickUse(extent), 924*mib)
	if len(*failed) != 1 || c.Stats.Leaked() != 1 || !strings.Contains((*failed)[0], "(-4194304 bytes)") {
		t.Errorf("free space: %q, %d leaks", *failed, c.Stats.Leaked())
	}
}

func TestPickFollowsTheWeightsAndTheSeed(t *testing.T) {
	picks := func(seed uint64) []int {
		r := NewRand(seed)
		var got []int
		for range 300 {
			i := -1
			cs := []Choice{{When(false, 5), func() { i = 0 }}, {1, func() { i = 1 }}, {3, func() { i = 2 }}}
			if !Pick(r, cs) {
				t.Fatal("nothing picked")
			}
			got = append(got, i)
		}
		return got
	}
	a, b := picks(1), picks(1)
	counts := [3]int{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("the same seed made other choices")
		}
		counts[a[i]]++
	}
	if counts[0] != 0 || counts[1] < 40 || counts[2] < 3*counts[1]/2 {
		t.Errorf("choices %v for weights 0, 1, 3", counts)
	}
	if Pick(NewRand(1), []Choice{{0, func() { t.Error("ran a choice of weight 0") }}}) {
		t.Error("picked with nothing allowed")
	}
	next := Sources(1)
	if next().Uint64() == next().Uint64() {
		t.Error("two sources start alike")
	}
	if NewRand(1).Uint64() == NewRand(2).Uint64() {
		t.Error("seeds 1 and 2 start alike")
	}
}

func TestReadConfigAndKillDelay(t *testing.T) {
	def := Config{Duration: time.Minute, KillEvery: 10 * time.Second, CheckEvery: 20 * time.Second, Deadline: time.Minute}
	env := map[string]string{"X_SEED": "7", "X_DURATION": "0", "X_CALL_DEADLINE": "2m"}
	c, err := ReadConfig(func(k string) string { return env[k] }, "X_", "X_CALL_DEADLINE", def)
	if err != nil || c.Seed != 7 || c.Duration != 0 || c.Deadline != 2*time.Minute || c.KillEvery != def.KillEvery {
		t.Errorf("config %+v, %v", c, err)
	}
	for k, v := range map[string]string{"X_SEED": "-1", "X_KILL_EVERY": "0", "X_CALL_DEADLINE": "soon"} {
		if _, err := ReadConfig(func(e string) string { return map[string]string{k: v}[e] }, "X_", "X_CALL_DEADLINE", def); err == nil {
			t.Errorf("%s=%s taken", k, v)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		if d := c.KillDelay(r); d < time.Second || d > 30*time.Second {
			t.Fatalf("kill delay %s outside a tenth and three times 10s", d)
		}
	}
}

func TestStatsReport(t *testing.T) {
	s := NewStats()
	s.Began("create")
	s.Done("create", 1500*time.Millisecond)
	s.Try("CreateVolume", time.Second)
	s.Kill("node", 1)
	s.Kill("controller", 0)
	s.Count("ABORTED answers")
	s.Longest("slowest back to ready", 3*time.Second)
	s.Checked("LVs as the model")
	s.FullCheck()
	s.Writes(5, 4)
	s.Stuck()
	s.Leak("LV x")
	cfg := Config{Seed: 9, Duration: time.Minute, Deadline: time.Minute}
	r := s.Report("soak", cfg, 2*time.Minute, "CSI call")
	for _, want := range []string{"soak report: seed 9", "create", "CSI call", "2 kills (controller 1, node 1; 1 with operations in flight)",
		"ABORTED answers: 1; slowest back to ready: 3s", "(1 full checks at rest)", "LVs as the model",
		"acknowledged writes: 5; acknowledged files read back and checked: 4; stuck past the deadline (1m0s): 1; leaked: 1", "leaked: LV x"} {
		if !strings.Contains(r, want) {
			t.Errorf("report does not say %q:\n%s", want, r)
		}
	}
	if got := s.Summary("soak", cfg, 2*time.Minute); !strings.Contains(got, "1 operations, 2 kills") || !strings.Contains(got, "1 invariant checks (1 full), 5 acknowledged writes, 4 file reads checked, 1 stuck, 1 leaked") {
		t.Errorf("summary %q", got)
	}
}
