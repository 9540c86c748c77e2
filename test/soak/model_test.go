//go:build vmtest

package soak

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"carve.dev/carve/lvm"
)

// layout is a volume type as a StorageClass asks for it (the parameter
// keys are Carve's: test/crash uses the same).
type layout struct {
	name   string
	params map[string]string
}

var layouts = []layout{
	{"thick", map[string]string{}},
	{"thin", map[string]string{"thinPool": pool}},
	{"striped", map[string]string{"stripes": "2"}},
	{"raid1", map[string]string{"mirrors": "1"}},
}

func (l layout) thin() bool { return l.params["thinPool"] != "" }

// lvOptions is what lvm2 is asked for a volume of this layout: its
// footprint is what the VG gives it.
func (l layout) lvOptions(size int64) lvm.CreateLVOptions {
	o := lvm.CreateLVOptions{Size: uint64(size)}
	switch l.name {
	case "thin":
		o.ThinPool = pool
	case "striped":
		o.Stripes = 2
	case "raid1":
		o.Mirrors = 1
	}
	return o
}

// files are the acknowledged writes of a volume: name -> checksum.
type files map[string]sum

// vol is a volume as the CO knows it.
type vol struct {
	name, id, lv string
	layout       layout
	size         int64 // the capacity carve answered
	context      map[string]string
	// publishContext is ControllerPublishVolume's answer.
	publishContext map[string]string
	attached       bool
	staged         bool
	published      bool
	files          files
	bytes          int64 // written into files
	nextFile       int
	busy           bool
}

func (v *vol) staging() string { return "staging/" + v.name }
func (v *vol) target() string  { return "target/" + v.name }

// snap is a snapshot and the files its source held when it was taken.
type snap struct {
	name, id, lv string
	source       string
	thin         bool
	size         int64
	files        files
	busy         bool
}

// model is what the CO has been told: volumes, snapshots, their state.
// Workers claim the objects of an operation (busy) so that no two touch
// one object at once, as a CO serializes operations per object.
type model struct {
	mu     sync.Mutex
	vols   map[string]*vol
	snaps  map[string]*snap
	next   int
	extent uint64
	// reserved is thick space promised to operations under way.
	reserved int64
}

// thickUse is what the model's volumes and thick snapshots take from the
// VG: base free less this is the VG's free space once calls settled.
func (m *model) thickUse() int64 {
	var n int64
	for _, v := range m.vols {
		n += int64(lvm.Footprint(v.layout.lvOptions(v.size), m.extent))
	}
	for _, s := range m.snaps {
		if !s.thin {
			n += int64(lvm.Footprint(lvm.CreateLVOptions{Size: uint64(s.size)}, m.extent))
		}
	}
	return n
}

// reserve promises n bytes of thick space, or says there is no room left
// in the budget.
func (m *model) reserve(n int64) bool {
	if m.thickUse()+m.reserved+n > thickBudget {
		return false
	}
	m.reserved += n
	return true
}

func (m *model) newName(prefix string) string {
	m.next++
	return fmt.Sprintf("%s%d", prefix, m.next)
}

// op is one operation a worker picked: its kind, its objects (claimed),
// the thick space reserved for it, and what it does.
type op struct {
	kind     string
	name     string // of the volume it creates
	v        *vol
	s        *snap
	reserved int64
	run      func(w *worker) error
}

const (
	maxVolumes   = 10
	maxSnapshots = 6
	maxSize      = 96 * mib
)

// choice is a kind of operation with its weight and the objects it may
// apply to now.
type choice struct {
	weight int
	make   func(r *rand.Rand) *op
}

// pick claims a random operation the model allows now (nil: none).
func (s *soak) pick(r *rand.Rand) *op {
	m := s.model
	m.mu.Lock()
	defer m.mu.Unlock()
	var idle []*vol
	for _, name := range sortedKeys(m.vols) {
		if v := m.vols[name]; !v.busy {
			idle = append(idle, v)
		}
	}
	var idleSnaps []*snap
	for _, name := range sortedKeys(m.snaps) {
		if sn := m.snaps[name]; !sn.busy {
			idleSnaps = append(idleSnaps, sn)
		}
	}
	where := func(f func(v *vol) bool) []*vol {
		return slices.DeleteFunc(slices.Clone(idle), func(v *vol) bool { return !f(v) })
	}
	onVol := func(kind string, weight int, vs []*vol, run func(w *worker, v *vol) error) choice {
		if len(vs) == 0 {
			return choice{}
		}
		return choice{weight, func(r *rand.Rand) *op {
			v := vs[r.IntN(len(vs))]
			return &op{kind: kind, v: v, run: func(w *worker) error { return run(w, v) }}
		}}
	}
	count := len(m.vols)
	// Until a volume is published, the steps that get one there come
	// first, and the long operations (snapshots, restores, expansions)
	// wait: the run must reach its writes early, even a short one in a
	// slow VM.
	up, slow := 1, 2
	if !slices.ContainsFunc(slices.Collect(maps.Values(m.vols)), func(v *vol) bool { return v.published }) {
		up, slow = 3, 1
	}
	var cs []choice
	if count < maxVolumes {
		cs = append(cs, choice{max(4-count, 1), func(r *rand.Rand) *op {
			l := layouts[r.IntN(len(layouts))]
			size := int64(16+8*r.IntN(5)) * mib
			name := m.newName("v")
			return &op{kind: "CreateVolume/" + l.name, name: name, reserved: int64(lvm.Footprint(l.lvOptions(size), m.extent)),
				run: func(w *worker) error { return w.create(name, l, size, nil) }}
		}})
	}
	cs = append(cs,
		onVol("DeleteVolume", 1+count/3, where(func(v *vol) bool { return !v.attached }), (*worker).deleteVolume),
		onVol("ControllerPublishVolume", 4*up, where(func(v *vol) bool { return !v.attached }), (*worker).attach),
		onVol("ControllerUnpublishVolume", 1, where(func(v *vol) bool { return v.attached && !v.staged }), (*worker).detach),
		onVol("NodeStageVolume", 6*up, where(func(v *vol) bool { return v.attached && !v.staged }), (*worker).stage),
		onVol("NodeUnstageVolume", 1, where(func(v *vol) bool { return v.staged && !v.published }), (*worker).unstage),
		onVol("NodePublishVolume", 6*up, where(func(v *vol) bool { return v.staged && !v.published }), (*worker).publish),
		onVol("NodeUnpublishVolume", 1, where(func(v *vol) bool { return v.published }), (*worker).unpublish),
		onVol("write", 10, where(func(v *vol) bool { return v.published && v.bytes < v.size/4 }), (*worker).write),
		onVol("verify", 1, where(func(v *vol) bool { return v.staged && len(v.files) > 0 }), (*worker).verifyOp),
	)
	expandable := where(func(v *vol) bool { return v.size+32*mib <= maxSize })
	if len(expandable) > 0 {
		cs = append(cs, choice{slow, func(r *rand.Rand) *op {
			v := expandable[r.IntN(len(expandable))]
			size := v.size + int64(8+8*r.IntN(3))*mib
			grow := int64(lvm.Footprint(v.layout.lvOptions(size), m.extent) - lvm.Footprint(v.layout.lvOptions(v.size), m.extent))
			return &op{kind: "ControllerExpandVolume/" + v.layout.name, v: v, reserved: grow, run: func(w *worker) error { return w.expand(v, size) }}
		}})
	}
	if len(m.snaps) < maxSnapshots {
		cs = append(cs, onVol("CreateSnapshot", slow, idle, func(w *worker, v *vol) error { return w.snapshot(v, m.newNameLocked("s")) }))
		// A thick snapshot takes a copy and, while it copies, a frozen
		// point of up to the volume's size and a bit more.
		last := &cs[len(cs)-1]
		if mk := last.make; mk != nil {
			last.make = func(r *rand.Rand) *op {
				o := mk(r)
				o.kind += "/" + o.v.layout.name
				if !o.v.layout.thin() {
					o.reserved = 2*o.v.size + 68*mib
				}
				return o
			}
		}
	}
	if len(idleSnaps) > 0 {
		cs = append(cs, choice{1 + len(m.snaps)/2, func(r *rand.Rand) *op {
			sn := idleSnaps[r.IntN(len(idleSnaps))]
			return &op{kind: "DeleteSnapshot", s: sn, run: func(w *worker) error { return w.deleteSnapshot(sn) }}
		}})
		if count < maxVolumes {
			cs = append(cs, choice{slow, func(r *rand.Rand) *op {
				sn := idleSnaps[r.IntN(len(idleSnaps))]
				l := layouts[r.IntN(len(layouts))]
				if sn.thin && r.IntN(3) > 0 {
					l = layouts[1] // mostly the instant path: thin from thin
				}
				size := sn.size + int64(8*r.IntN(3))*mib
				name := m.newName("r")
				return &op{kind: "CreateVolume/restore-" + l.name, name: name, s: sn, reserved: int64(lvm.Footprint(l.lvOptions(size), m.extent)),
					run: func(w *worker) error { return w.create(name, l, size, sn) }}
			}})
		}
	}
	total := 0
	for _, c := range cs {
		if c.make != nil {
			total += c.weight
		}
	}
	if total == 0 {
		return nil
	}
	n := r.IntN(total)
	for _, c := range cs {
		if c.make == nil {
			continue
		}
		if n -= c.weight; n < 0 {
			o := c.make(r)
			if o.reserved > 0 && !m.reserve(o.reserved) {
				return nil
			}
			if o.v != nil {
				o.v.busy = true
			}
			if o.s != nil {
				o.s.busy = true
			}
			return o
		}
	}
	return nil
}

// object names what o works on, for the log.
func (o *op) object() string {
	switch {
	case o.name != "" && o.s != nil:
		return o.name + " from " + o.s.name
	case o.name != "":
		return o.name
	case o.v != nil:
		return o.v.name
	}
	return o.s.name
}

// newNameLocked is newName for an op's run, which runs without the lock.
func (m *model) newNameLocked(prefix string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.newName(prefix)
}

// release gives back what pick claimed.
func (s *soak) release(o *op) {
	m := s.model
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reserved -= o.reserved
	if o.v != nil {
		o.v.busy = false
	}
	if o.s != nil {
		o.s.busy = false
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// worker runs operations one after the other with its own random source.
type worker struct {
	id int
	s  *soak
	r  *rand.Rand
	t  *testing.T
}

// soak is one run: the model, carve, the counters.
type soak struct {
	t     *testing.T
	cfg   config
	lvm   *lvm.Client
	dir   string
	carve *carve
	model *model
	stats *stats
	base  lvm.VG

	// gate: workers hold it shared around each operation; a check, or a
	// kill between calls, holds it alone. quiet: a kill holds it, so that
	// no kill comes while a check reads.
	gate  sync.RWMutex
	quiet sync.Mutex

	began   time.Time
	stopMu  sync.Mutex
	stopped bool
	failed  []string
}

func newSoak(t *testing.T, cfg config, l *lvm.Client, bin, dir string, base lvm.VG) *soak {
	return &soak{t: t, cfg: cfg, lvm: l, dir: dir, base: base, carve: newCarve(t, bin, dir),
		model: &model{vols: map[string]*vol{}, snaps: map[string]*snap{}, extent: base.ExtentSize}, stats: newStats()}
}

// fail reports a failure; the run stops after the first few.
func (s *soak) fail(format string, args ...any) {
	msg := fmt.Errorf(format, args...).Error()
	s.t.Error(msg)
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	s.failed = append(s.failed, msg)
	if len(s.failed) >= 5 {
		s.stopped = true
	}
}

func (s *soak) stop() {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	s.stopped = true
}

func (s *soak) hasFailed() bool {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	return len(s.failed) > 0
}

func (s *soak) isStopped() bool {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	return s.stopped
}

// run is the soak proper: workers, the killer and the checks until the
// duration is up.
func (s *soak) run() {
	s.began = time.Now()
	var wg sync.WaitGroup
	// Each worker and the killer draw from their own source, seeded from
	// the run's seed.
	seeds := rand.New(rand.NewPCG(s.cfg.seed, 0x9e3779b97f4a7c15))
	source := func() *rand.Rand { return rand.New(rand.NewPCG(seeds.Uint64(), seeds.Uint64())) }
	killerRand := source()
	for i := range s.cfg.workers {
		w := &worker{id: i + 1, s: s, t: s.t, r: source()}
		wg.Go(w.loop)
	}
	killDone := make(chan struct{})
	go func() {
		defer close(killDone)
		s.killer(killerRand)
	}()
	end := time.Now().Add(s.cfg.duration)
	for !s.isStopped() && time.Now().Before(end) {
		time.Sleep(min(s.cfg.checkEvery, time.Until(end)))
		if time.Now().Before(end) {
			s.gate.Lock()
			s.quiet.Lock()
			s.check("periodic")
			s.quiet.Unlock()
			s.gate.Unlock()
		}
	}
	s.stop()
	<-killDone
	wg.Wait()
}

func (w *worker) loop() {
	for !w.s.isStopped() {
		w.s.gate.RLock()
		o := w.s.pick(w.r)
		if o == nil {
			w.s.gate.RUnlock()
			time.Sleep(200 * time.Millisecond)
			continue
		}
		start := time.Now()
		err := o.run(w)
		w.s.release(o)
		w.s.gate.RUnlock()
		if err != nil {
			w.s.fail("%s: %v", o.kind, err)
			w.s.stop() // the model no longer knows what carve holds
			return
		}
		w.s.stats.op(o.kind)
		w.t.Logf("%6.1fs worker %d: %s %s done in %s", time.Since(w.s.began).Seconds(), w.id, o.kind, o.object(), time.Since(start).Round(time.Millisecond))
	}
}

// killer SIGKILLs carve at random moments: two kills in three while a
// call is in flight, one between calls (while no call is under way).
func (s *soak) killer(r *rand.Rand) {
	for !s.isStopped() {
		time.Sleep(time.Duration(float64(s.cfg.killEvery) * (0.3 + 1.4*r.Float64())))
		if s.isStopped() {
			return
		}
		if r.IntN(3) == 0 {
			s.gate.Lock()
			s.quiet.Lock()
			s.carve.kill()
			s.stats.count(&s.stats.killsBetween)
			s.t.Logf("%6.1fs killed carve between calls", time.Since(s.began).Seconds())
			s.quiet.Unlock()
			s.gate.Unlock()
			continue
		}
		// A random time into a call: after a pause, the first moment one
		// is in flight.
		time.Sleep(time.Duration(r.IntN(1000)) * time.Millisecond)
		for wait := time.Now().Add(5 * time.Second); s.carve.inFlight.Load() == 0 && time.Now().Before(wait); {
			time.Sleep(5 * time.Millisecond)
		}
		s.quiet.Lock()
		n := s.carve.inFlight.Load()
		if n > 0 {
			s.stats.count(&s.stats.killsMid)
		} else {
			s.stats.count(&s.stats.killsBetween)
		}
		s.carve.kill()
		s.t.Logf("%6.1fs killed carve with %d calls in flight", time.Since(s.began).Seconds(), n)
		s.quiet.Unlock()
	}
}

// relPath is a path under the test directory.
func (s *soak) path(rel string) string { return s.dir + "/" + rel }

func lvOfID(id string) string { return id[strings.LastIndex(id, "/")+1:] }
