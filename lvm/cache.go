package lvm

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Cache answers the reads of queries (capacity, listings, stats, health
// probes) from the last report of each VG instead of running lvs, vgs and
// pvs again, and passes everything else to its Client. It is what keeps an
// idle node from polling LVM: csi-provisioner asks GetCapacity every
// minute, kubelet NodeGetVolumeStats for every volume every minute, and
// the node agent reports its storage every 30 s.
//
// Each read says how fresh its answer must be (Reads, a parameter of
// every read): only Cached reads, the queries', are answered from a
// report up to MaxAge old, and a Shared read from one read for its own
// operation; a Fresh read runs lvm2, so operations that change a volume
// keep deciding on fresh facts.
//
// # Why a cached answer cannot be stale by Carve's own doing
//
// Every change Carve makes to a VG goes through this Cache, and each bumps
// the VG's generation twice: before its command runs and after it ends
// (failed or not). A report is kept only if the generation did not move
// while it was read, and used only while the generation is still the one
// it was read at. So a report read before, during or across a change is
// never used after it: the first read after a change runs lvm2 again.
//
// # What can still change under it, and for how long
//
// lvm2 state that changes without a command of Carve's: thin pools fill as
// volumes are written, an administrator runs lvm2 by hand or edits its
// device selection, dmeventd extends a thin pool, a disk fails or
// vanishes. The VG's print (cacheprint.go; no lvm2, a few reads) is taken
// before the first report of each generation is read, and a query
// compares it with the print now, at most once a printEvery (a second)
// per VG; a moved print, or one that could be read and no longer can,
// starts a new generation. So these show at the next query:
//   - any change to the VG's metadata, by any process (lvcreate, lvextend,
//     lvremove, lvchange --addtag by hand; dmeventd's autoextend), and
//     PVs whose metadata headers cannot be read any more;
//   - the fill of each thin pool active at the VG's last lvs report, as
//     the kernel counts it: used data and metadata blocks, the pool's
//     mode (out_of_data_space, read-only, failed) and its needs_check
//     flag, so its data and metadata percents, the thin capacity and a
//     volume's ThinPoolFull; and such a pool gone inactive;
//   - lvm2's device selection: lvm.conf, lvmlocal.conf and the devices
//     file in the system dir the Client's lvm2 reads (lvmdevices
//     --deldev, a new filter), which hide PVs without writing any.
//
// A PV or pool that a report shows first is covered from the generation
// after (its first comparison finds the print's scope grown, so moved).
// A pool being written moves its print at almost every comparison: its
// VG is then read from lvm2 once a printEvery at most, and only when
// queries come.
//
// Other changes show within MaxAge, for which a report is used at most,
// or at once when a fresh read fails first (failedRead): activation by
// hand (lvchange -ay, autoactivation at boot) other than a pool going
// inactive; the kernel state of other LVs (a RAID's sync and health, a
// COW snapshot's fill); a PV that comes back or a disk grown under its
// PV; lvm2 configuration read from elsewhere (profiles, another
// process's --config). So does everything while a generation's print
// cannot be read (no pvs report yet, headers unreadable). Nothing that
// changes data relies on it.
type Cache struct {
	c *Client
	// MaxAge is how long a report may answer queries; 0 turns caching off
	// (every read runs lvm2).
	MaxAge time.Duration
	now    func() time.Time

	mu   sync.Mutex
	gens map[string]uint64 // VG -> generation, bumped around each change
	vgs  map[string]cached[VG]
	pvs  map[string]cached[[]PV]
	lvs  map[string]cached[[]LV] // every LV of the VG, hidden ones included
	// derived: values built from the lvs reports (cache_derived.go).
	derived map[string]derived
	// alive: when an lvm2 command of each VG last succeeded (Alive).
	alive map[string]time.Time
	// The VGs' prints (cacheprint.go): print reads one, nil for none;
	// lvmDir is the system dir of c's lvm2; pvPaths and pools are each
	// VG's PVs and active thin pools from its last pvs and lvs reports;
	// base is the print taken at the start of each VG's generation.
	print   func(printScope) (string, error)
	lvmDir  string
	pvPaths map[string][]string
	pools   map[string][]string
	base    map[string]genPrint
}

// genPrint is a VG's print taken before the first report of
// generation gen was read ("" when it could not be read), and when it was
// last compared with the disks.
type genPrint struct {
	gen     uint64
	print   string
	checked time.Time
}

// printEvery paces the comparisons of a VG's print with the disks, the
// kernel and lvm2's files: a burst of queries reads them once.
const printEvery = time.Second

// cached is one report: what was read, at which generation and when.
type cached[T any] struct {
	v   T
	gen uint64
	at  time.Time
}

// NewCache caches the reports of c for at most maxAge.
func NewCache(c *Client, maxAge time.Duration) *Cache {
	return &Cache{c: c, MaxAge: maxAge, now: time.Now, gens: map[string]uint64{},
		vgs: map[string]cached[VG]{}, pvs: map[string]cached[[]PV]{}, lvs: map[string]cached[[]LV]{},
		alive: map[string]time.Time{}, print: vgPrint, lvmDir: c.systemDir(), pvPaths: map[string][]string{},
		pools: map[string][]string{}, base: map[string]genPrint{}}
}

// Alive tells whether an lvm2 command of vg, a report or a change, ended
// in success within the last within: proof that lvm2 reads vg and takes
// its lock now, without running a command of the caller's own. A liveness
// probe asks it first (lvmvol.Manager.Probe): its own vgs would wait for
// the VG's lock behind every command Carve has queued.
func (x *Cache) Alive(vg string, within time.Duration) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	at, ok := x.alive[vg]
	return ok && x.now().Sub(at) < within
}

// ran notes that a command of vg succeeded.
func (x *Cache) ran(vg string) {
	x.mu.Lock()
	x.alive[vg] = x.now()
	x.mu.Unlock()
}

// Reads is how fresh the report a read answers from must be: Fresh,
// Cached or Shared. A Client always reads lvm2; a Cache honours it (with
// caching off, every read is Fresh).
type Reads struct {
	cached bool
	scope  *readScope
}

// Fresh reads run lvm2: what every operation that changes a volume
// decides on. It is the zero Reads.
var Fresh = Reads{}

// Cached reads are a query's (capacity, listings, stats, liveness): a
// Cache may answer them from a report up to MaxAge old (see Cache for why
// that cannot miss a change Carve made).
var Cached = Reads{cached: true}

// readScope records, for one operation, the generation at which each
// report ("lvs", "vgs" or "pvs", of a VG) was read for it.
type readScope struct {
	mu   sync.Mutex
	read map[string]uint64 // kind + " " + VG -> generation
}

// Shared is the reads of one operation that wants facts as fresh as
// itself, but asks several questions of them: a Cache reads each VG from
// lvm2 (the whole VG's report) at the operation's first read, answers its
// later ones from that report until a change of the VG, and keeps the
// report for queries too. Each call is a new operation: the caller passes
// the value it returns to each of the operation's reads. The node's
// NodeStageVolume is one: it looks up the volume and its thin pool, and
// its report then serves the node calls that follow (NodePublishVolume...)
// as a query's would.
func Shared() Reads { return Reads{scope: &readScope{read: map[string]uint64{}}} }

// IsCached tells Cached reads.
func (r Reads) IsCached() bool { return r.cached }

// Scope identifies the operation of Shared reads (nil for others): reads
// under the same scope may share a report. Tests that count lvm2 runs
// without a Cache use it.
func (r Reads) Scope() any {
	if r.scope != nil {
		return r.scope
	}
	return nil
}

// usable tells whether a report of vg at gen may answer a read r: a
// query's, while not older than MaxAge; a shared read's, when it was read
// for this very operation (or since).
func (x *Cache) usable(r Reads, key string, gen uint64, at time.Time) bool {
	if x.MaxAge <= 0 {
		return false
	}
	if r.cached && x.now().Sub(at) < x.MaxAge {
		return true
	}
	s := r.scope
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	read, ok := s.read[key]
	return ok && read == gen
}

// fromCache tells whether reads r may come from a report at all.
func (x *Cache) fromCache(r Reads) bool {
	return x.MaxAge > 0 && (r.cached || r.scope != nil)
}

// lookup returns the report of vg in m if r may use one and it is
// current; the generation to read a new one at otherwise.
func lookup[T any](x *Cache, r Reads, kind string, m map[string]cached[T], vg string) (v T, gen uint64, ok bool) {
	if x.fromCache(r) {
		x.checkPrint(vg)
	}
	x.mu.Lock()
	gen = x.gens[vg]
	e, found := m[vg]
	x.mu.Unlock()
	if found && e.gen == gen && x.usable(r, kind+" "+vg, gen, e.at) {
		return e.v, gen, true
	}
	return v, gen, false
}

// store keeps a report read at gen, unless a change began since, and
// notes it as read for r's operation (Shared).
func store[T any](x *Cache, r Reads, kind string, m map[string]cached[T], vg string, gen uint64, v T) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.gens[vg] != gen {
		return
	}
	m[vg] = cached[T]{v: v, gen: gen, at: x.now()}
	if s := r.scope; s != nil {
		s.mu.Lock()
		s.read[kind+" "+vg] = gen
		s.mu.Unlock()
	}
}

// read answers from the cache or runs fetch and keeps what it returns;
// kind names the report ("lvs", "vgs", "pvs").
func read[T any](x *Cache, ctx context.Context, r Reads, kind string, m map[string]cached[T], vg string, fetch func() (T, error)) (T, error) {
	v, gen, ok := lookup(x, r, kind, m, vg)
	if ok {
		return v, nil
	}
	x.takeBasePrint(vg, gen)
	v, err := fetch()
	if err != nil {
		x.failedRead(ctx, vg)
		return v, err
	}
	x.ran(vg)
	store(x, r, kind, m, vg, gen, v)
	return v, nil
}

// changing wraps a change to vg: the generation moves before and after it.
func (x *Cache) changing(vg string, change func() error) error {
	x.bump(vg)
	defer x.bump(vg)
	err := change()
	if err == nil {
		x.ran(vg)
	}
	return err
}

func (x *Cache) bump(vg string) {
	x.mu.Lock()
	x.gens[vg]++
	x.mu.Unlock()
}

// failedRead forgets the reports of vg after a read of lvm2 failed: the
// failure is newer than any of them. A VG whose disks vanished fails every
// fresh read, a volume health probe's for one, while a report read before
// would still say all is well for up to MaxAge; so the next query reads
// too, and fails as it should. An LV not found may also be news (removed
// by hand). A read cut by its context tells nothing of lvm2 and forgets
// nothing.
func (x *Cache) failedRead(ctx context.Context, vg string) {
	if ctx.Err() == nil {
		x.bump(vg)
	}
}

// Invalidate forgets what the cache knows of vg, for changes made without
// it (by hand, by another program).
func (x *Cache) Invalidate(vg string) { x.bump(vg) }

// GetVG is Client.GetVG, read as r says.
func (x *Cache) GetVG(ctx context.Context, r Reads, vg string) (VG, error) {
	if err := ValidateVGName(vg); err != nil {
		return VG{}, err
	}
	v, err := read(x, ctx, r, "vgs", x.vgs, vg, func() (VG, error) { return x.c.GetVG(ctx, vg) })
	v.Tags = slices.Clone(v.Tags)
	return v, err
}

// ListVGPVs is Client.ListVGPVs, read as r says.
func (x *Cache) ListVGPVs(ctx context.Context, r Reads, vg string) ([]PV, error) {
	if err := ValidateVGName(vg); err != nil {
		return nil, err
	}
	pvs, err := read(x, ctx, r, "pvs", x.pvs, vg, func() ([]PV, error) {
		pvs, err := x.c.ListVGPVs(ctx, vg)
		if err == nil {
			x.notePVs(vg, pvs)
		}
		return pvs, err
	})
	return slices.Clone(pvs), err
}

// allLVs is Client.ListAllLVs through the cache; the caller gets copies.
func (x *Cache) allLVs(ctx context.Context, r Reads, vg string) ([]LV, error) {
	lvs, err := read(x, ctx, r, "lvs", x.lvs, vg, func() ([]LV, error) {
		lvs, err := x.c.ListAllLVs(ctx, vg)
		if err == nil {
			x.notePools(vg, lvs)
		}
		return lvs, err
	})
	if err != nil {
		return nil, err
	}
	out := make([]LV, len(lvs))
	for i, lv := range lvs {
		lv.Tags = slices.Clone(lv.Tags)
		out[i] = lv
	}
	return out, nil
}

// ListLVs is Client.ListLVs, read as r says: one `lvs -a` answers it and
// ListAllLVs.
func (x *Cache) ListLVs(ctx context.Context, r Reads, vg string) ([]LV, error) {
	if err := ValidateVGName(vg); err != nil {
		return nil, err
	}
	all, err := x.allLVs(ctx, r, vg)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(lv LV) bool { return lv.Hidden }), nil
}

// ListAllLVs is Client.ListAllLVs, read as r says.
func (x *Cache) ListAllLVs(ctx context.Context, r Reads, vg string) ([]LV, error) {
	if err := ValidateVGName(vg); err != nil {
		return nil, err
	}
	return x.allLVs(ctx, r, vg)
}

// GetLV is Client.GetLV, read as r says. A fresh read asks lvm2 for the
// one LV; a cached or shared one finds it in the VG's report.
func (x *Cache) GetLV(ctx context.Context, r Reads, vg, name string) (LV, error) {
	if err := validateVGLV(vg, name); err != nil {
		return LV{}, err
	}
	if !x.fromCache(r) {
		lv, err := x.c.GetLV(ctx, vg, name)
		if err != nil {
			x.failedRead(ctx, vg)
		} else {
			x.ran(vg)
		}
		return lv, err
	}
	all, err := x.allLVs(ctx, r, vg)
	if err != nil {
		return LV{}, err
	}
	for _, lv := range all {
		if lv.Name == name {
			return lv, nil
		}
	}
	return LV{}, fmt.Errorf("lvs %s/%s: logical volume %w", vg, name, ErrNotFound)
}
