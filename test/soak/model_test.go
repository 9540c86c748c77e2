//go:build vmtest

package soak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"carve.dev/carve/lvm"
	"carve.dev/carve/test/soakmodel"
)

// layouts are the volume types as a StorageClass asks for them (the
// parameter keys are Carve's: test/crash uses the same).
var layouts = []*soakmodel.Layout{
	{Name: "thick", Params: map[string]string{}, Segtype: "linear"},
	{Name: "thin", Params: map[string]string{"thinPool": pool}, Segtype: "thin"},
	{Name: "striped", Params: map[string]string{"stripes": "2"}, Segtype: "striped"},
	{Name: "raid1", Params: map[string]string{"mirrors": "1"}, Segtype: "raid1"},
}

// vol is a volume of the model (its ID the CSI volume ID, its size the
// capacity carve answered, attached while published to the node) and
// what else the CO keeps of it.
type vol struct {
	soakmodel.Volume
	context map[string]string
	// publishContext is ControllerPublishVolume's answer.
	publishContext map[string]string
	staged         bool
	published      bool
	nextFile       int
}

func (v *vol) staging() string { return "staging/" + v.Name }
func (v *vol) target() string  { return "target/" + v.Name }

// model is what the CO has been told (soakmodel's model of it) under a
// lock: unlike the cluster soak's one goroutine, workers run side by
// side. They claim the objects of an operation (Busy) so that no two
// touch one object at once, as a CO serializes operations per object.
type model struct {
	mu     sync.Mutex
	soak   soakmodel.Model[*vol]
	extent int64
	// reserved is thick space promised to operations under way.
	reserved int64
}

// reserve promises n bytes of thick space, or says there is no room left
// in the budget.
func (m *model) reserve(n int64) bool {
	if m.soak.ThickUse(m.extent)+m.reserved+n > thickBudget {
		return false
	}
	m.reserved += n
	return true
}

// op is one operation a worker picked: its kind, its objects (claimed),
// the thick space reserved for it, and what it does.
type op struct {
	kind     string
	name     string // of the volume it creates
	v        *vol
	s        *soakmodel.Snapshot
	reserved int64
	run      func(w *worker) error
}

const (
	maxVolumes   = 10
	maxSnapshots = 6
	maxSize      = 96 * mib
)

// pick claims a random operation the model allows now (nil: none).
func (s *soak) pick(r *rand.Rand) *op {
	m := s.model
	m.mu.Lock()
	defer m.mu.Unlock()
	idle := m.soak.Idle(func(*vol) bool { return true })
	idleSnaps := m.soak.IdleSnapshots(func(*soakmodel.Snapshot) bool { return true })
	var o *op
	onVol := func(kind string, weight int, ok func(v *vol) bool, run func(w *worker, v *vol) error) soakmodel.Choice {
		vs := m.soak.Idle(ok)
		return soakmodel.Choice{Weight: soakmodel.When(len(vs) > 0, weight), Do: func() {
			v := soakmodel.One(r, vs)
			o = &op{kind: kind, v: v, run: func(w *worker) error { return run(w, v) }}
		}}
	}
	count := len(m.soak.Volumes)
	// Until a volume is published, the steps that get one there come
	// first, and the long operations (snapshots, restores, expansions)
	// wait: the run must reach its writes early, even a short one in a
	// slow VM.
	up, slow := 1, 2
	if !slices.ContainsFunc(m.soak.Volumes, func(v *vol) bool { return v.published }) {
		up, slow = 3, 1
	}
	expandable := m.soak.Idle(func(v *vol) bool { return v.Size+32*mib <= maxSize })
	cs := []soakmodel.Choice{
		{Weight: soakmodel.When(count < maxVolumes, max(4-count, 1)), Do: func() {
			l := soakmodel.One(r, layouts)
			size := int64(16+8*r.IntN(5)) * mib
			name := m.soak.Next("v")
			o = &op{kind: "CreateVolume/" + l.Name, name: name, reserved: l.Footprint(size, m.extent),
				run: func(w *worker) error { return w.create(name, l, size, nil) }}
		}},
		onVol("DeleteVolume", 1+count/3, func(v *vol) bool { return !v.Attached }, (*worker).deleteVolume),
		onVol("ControllerPublishVolume", 4*up, func(v *vol) bool { return !v.Attached }, (*worker).attach),
		onVol("ControllerUnpublishVolume", 1, func(v *vol) bool { return v.Attached && !v.staged }, (*worker).detach),
		onVol("NodeStageVolume", 6*up, func(v *vol) bool { return v.Attached && !v.staged }, (*worker).stage),
		onVol("NodeUnstageVolume", 1, func(v *vol) bool { return v.staged && !v.published }, (*worker).unstage),
		onVol("NodePublishVolume", 6*up, func(v *vol) bool { return v.staged && !v.published }, (*worker).publish),
		onVol("NodeUnpublishVolume", 1, func(v *vol) bool { return v.published }, (*worker).unpublish),
		onVol("write", 10, func(v *vol) bool { return v.published && v.Writes.Bytes() < v.Size/4 }, (*worker).write),
		onVol("verify", 1, func(v *vol) bool { return v.staged && v.Writes.Count() > 0 }, (*worker).verifyOp),
		{Weight: soakmodel.When(len(expandable) > 0, slow), Do: func() {
			v := soakmodel.One(r, expandable)
			size := v.Size + int64(8+8*r.IntN(3))*mib
			o = &op{kind: "ControllerExpandVolume/" + v.Layout.Name, v: v, reserved: v.Layout.Footprint(size, m.extent) - v.Layout.Footprint(v.Size, m.extent),
				run: func(w *worker) error { return w.expand(v, size) }}
		}},
		{Weight: soakmodel.When(len(m.soak.Snapshots) < maxSnapshots && len(idle) > 0, slow), Do: func() {
			v := soakmodel.One(r, idle)
			o = &op{kind: "CreateSnapshot/" + v.Layout.Name, v: v, run: func(w *worker) error { return w.snapshot(v, m.newNameLocked("s")) }}
			// A thick snapshot takes a copy and, while it copies, a frozen
			// point of up to the volume's size and a bit more.
			if !v.Layout.Thin() {
				o.reserved = 2*v.Size + 68*mib
			}
		}},
		{Weight: soakmodel.When(len(idleSnaps) > 0, 1+len(m.soak.Snapshots)/2), Do: func() {
			sn := soakmodel.One(r, idleSnaps)
			o = &op{kind: "DeleteSnapshot", s: sn, run: func(w *worker) error { return w.deleteSnapshot(sn) }}
		}},
		{Weight: soakmodel.When(len(idleSnaps) > 0 && count < maxVolumes, slow), Do: func() {
			sn := soakmodel.One(r, idleSnaps)
			l := soakmodel.One(r, layouts)
			if sn.Layout.Thin() && r.IntN(3) > 0 {
				l = layouts[1] // mostly the instant path: thin from thin
			}
			size := sn.Size + int64(8*r.IntN(3))*mib
			name := m.soak.Next("r")
			o = &op{kind: "CreateVolume/restore-" + l.Name, name: name, s: sn, reserved: l.Footprint(size, m.extent),
				run: func(w *worker) error { return w.create(name, l, size, sn) }}
		}},
	}
	if !soakmodel.Pick(r, cs) || o.reserved > 0 && !m.reserve(o.reserved) {
		return nil
	}
	if o.v != nil {
		o.v.Busy = true
	}
	if o.s != nil {
		o.s.Busy = true
	}
	return o
}

// object names what o works on, for the log.
func (o *op) object() string {
	switch {
	case o.name != "" && o.s != nil:
		return o.name + " from " + o.s.Name
	case o.name != "":
		return o.name
	case o.v != nil:
		return o.v.Name
	}
	return o.s.Name
}

// newNameLocked is Next for an op's run, which runs without the lock.
func (m *model) newNameLocked(prefix string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.soak.Next(prefix)
}

// release gives back what pick claimed.
func (s *soak) release(o *op) {
	m := s.model
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reserved -= o.reserved
	if o.v != nil {
		o.v.Busy = false
	}
	if o.s != nil {
		o.s.Busy = false
	}
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
	stats *soakmodel.Stats
	// verdicts are the checks' (soakmodel's Checker), failures through fail.
	verdicts *soakmodel.Checker
	base     lvm.VG

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
	s := &soak{t: t, cfg: cfg, lvm: l, dir: dir, base: base, carve: newCarve(t, bin, dir),
		model: &model{extent: int64(base.ExtentSize)}, stats: soakmodel.NewStats()}
	s.verdicts = &soakmodel.Checker{Stats: s.stats, Fail: func(msg string) { s.fail("%s", msg) }}
	return s
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
	source := soakmodel.Sources(s.cfg.Seed)
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
	end := time.Now().Add(s.cfg.Duration)
	for !s.isStopped() && time.Now().Before(end) {
		time.Sleep(min(s.cfg.CheckEvery, time.Until(end)))
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
		w.s.stats.Began(o.kind)
		err := o.run(w)
		w.s.release(o)
		w.s.gate.RUnlock()
		if err != nil {
			w.s.fail("%s: %v", o.kind, err)
			w.s.stop() // the model no longer knows what carve holds
			return
		}
		w.s.stats.Done(o.kind, time.Since(start))
		w.t.Logf("%6.1fs worker %d: %s %s done in %s", time.Since(w.s.began).Seconds(), w.id, o.kind, o.object(), time.Since(start).Round(time.Millisecond))
	}
}

// killer SIGKILLs carve at random moments: two kills in three while a
// call is in flight, one between calls (while no call is under way).
func (s *soak) killer(r *rand.Rand) {
	for !s.isStopped() {
		time.Sleep(s.cfg.KillDelay(r))
		if s.isStopped() {
			return
		}
		if r.IntN(3) == 0 {
			s.gate.Lock()
			s.quiet.Lock()
			s.carve.kill()
			s.stats.Kill("between calls", 0)
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
			s.stats.Kill("in a call", int(n))
		} else {
			s.stats.Kill("between calls", 0)
		}
		s.carve.kill()
		s.t.Logf("%6.1fs killed carve with %d calls in flight", time.Since(s.began).Seconds(), n)
		s.quiet.Unlock()
	}
}

// relPath is a path under the test directory.
func (s *soak) path(rel string) string { return s.dir + "/" + rel }

func lvOfID(id string) string { return id[strings.LastIndex(id, "/")+1:] }
