package lvmvol

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"carve.dev/carve/driver/internal/keylock"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// LVM is what the manager asks of lvm2: an lvm.Cache in production, a
// fake in unit tests. It is made of the small interfaces below, one per
// kind of work, so that a reader sees which calls a part of the manager
// makes; each method is one the manager calls. lvm.Client's other ways to
// do the same (RemoveLV, CreateThinSnapshot, CreateCOWSnapshot) are left
// out: the variants here save the lvm2 runs those spend reading what the
// caller has read already (see each use for why that is safe there).
type LVM interface {
	Reports
	LVChanges
	Snapshots
	Conversions
	WriteCaches
	ThinBlocks
	Repairs
}

// Reports read lvm2's reports of a VG, each as fresh as its caller says
// (lvm.Reads: lvm.Fresh, lvm.Cached for a query, or one operation's
// lvm.Shared; see lvm.Cache).
type Reports interface {
	GetVG(ctx context.Context, r lvm.Reads, vg string) (lvm.VG, error)
	GetLV(ctx context.Context, r lvm.Reads, vg, name string) (lvm.LV, error)
	// ListLVs leaves out the internal LVs (lvm.LV.Hidden) that
	// ListAllLVs lists too: every user but one wants volumes only, and an
	// lvm.Cache answers both from one report.
	ListLVs(ctx context.Context, r lvm.Reads, vg string) ([]lvm.LV, error)
	ListAllLVs(ctx context.Context, r lvm.Reads, vg string) ([]lvm.LV, error)
	ListVGPVs(ctx context.Context, r lvm.Reads, vg string) ([]lvm.PV, error)
}

// LVChanges create, change and remove LVs. AddTags, RemoveTags and
// ChangeTags each run one lvchange; all three stay for the call sites'
// sake: a step that adds or drops one tag says which, and the crash
// tests fail each step by that name.
type LVChanges interface {
	CreateLV(ctx context.Context, opts lvm.CreateLVOptions) (lvm.LV, error)
	CheckPlacement(ctx context.Context, opts lvm.CreateLVOptions) error
	ExtendLV(ctx context.Context, vg, name string, size uint64) error
	// RemoveLVOf removes an LV the caller has read (lvm.Client.RemoveLVOf).
	RemoveLVOf(ctx context.Context, lv lvm.LV) error
	Activate(ctx context.Context, vg, name string) error
	Deactivate(ctx context.Context, vg, name string) error
	AddTags(ctx context.Context, vg, name string, tags ...string) error
	RemoveTags(ctx context.Context, vg, name string, tags ...string) error
	ChangeTags(ctx context.Context, vg, name string, add, remove []string) error
	// RetagAndActivate changes tags and activation in one lvchange run
	// (see its uses for why the order it commits them in is safe there).
	RetagAndActivate(ctx context.Context, vg, name string, add, remove []string, active bool) error
}

// Snapshots make lvm2's snapshots of an origin the caller has read
// (lvm.Client.CreateSnapshotOf): thin ones, and the COW frozen points of
// thick volumes (freeze.go).
type Snapshots interface {
	CreateSnapshotOf(ctx context.Context, origin lvm.LV, name string, o lvm.SnapshotOptions) (lvm.LV, error)
}

// Conversions change a thick LV's mirrors (modify.go).
type Conversions interface {
	ConvertMirrors(ctx context.Context, vg, name string, mirrors int) error
	RemoveStrayRAIDParts(ctx context.Context, vg, name string) ([]string, error)
	CheckConversion(ctx context.Context, vg lvm.VG, lv lvm.LV, have, want int, integrity bool) error
}

// WriteCaches attach and split volumes' write caches (writecache.go).
type WriteCaches interface {
	CreateCacheVol(ctx context.Context, vg, name string, size, extent uint64, refs, tags []string) error
	AttachWriteCache(ctx context.Context, vg, name, cachevol string) error
	SplitCache(ctx context.Context, vg, name string) error
}

// ThinBlocks read which blocks of thin LVs their pool maps (blocks.go).
type ThinBlocks interface {
	ThinAllocated(ctx context.Context, vg, lv string, from uint64, each func(lvm.Range) error) error
	ThinDelta(ctx context.Context, vg, base, target string, from uint64, each func(lvm.Range) error) error
}

// Repairs are the start-up repairs' (see Manager.RepairInterruptedLVM).
type Repairs interface {
	// RepairInterrupted resumes the devices of a VG that an lvm2 command
	// cut short left suspended (see lvm.Client.RepairInterrupted).
	RepairInterrupted(ctx context.Context, vg string) ([]string, error)
	// MakeNodes makes the missing /dev nodes of a VG's active LVs.
	MakeNodes(ctx context.Context, vg string) error
	// ReleaseMetadataSnaps releases the pools' metadata snapshots a
	// killed read left (lvm.Client.ReleaseMetadataSnaps).
	ReleaseMetadataSnaps(ctx context.Context, vg string) ([]string, error)
}

// ReportCache is what an lvm.Cache offers beyond LVM, for queries:
// values built once per report, and proof that lvm2 is alive without a
// command of the caller's own.
type ReportCache interface {
	// DerivedFromLVs is lvm.Cache.DerivedFromLVs: what build makes of a
	// VG's LVs, built once per report.
	DerivedFromLVs(ctx context.Context, r lvm.Reads, vg, key string, build func([]lvm.LV) (any, error)) (any, error)
	// Alive is lvm.Cache.Alive: whether a command of vg succeeded within
	// the last within.
	Alive(vg string, within time.Duration) bool
}

// Wiper zeroes block devices.
type Wiper interface {
	// Zero zeroes length bytes of device from offset.
	Zero(ctx context.Context, device string, offset, length int64) error
	// Flush makes the zeroes written to device so far durable.
	Flush(ctx context.Context, device string) error
}

// Manager carries out volume operations on this node's volume groups.
type Manager struct {
	lvm LVM
	// cache is Config.Cache: nil when lvm caches no reports.
	cache  ReportCache
	wiper  Wiper
	copier Copier
	node   string
	vgs    []string
	// maxPublished caps the volumes published (active) at once; 0: none.
	maxPublished int
	// overprovision is the thin over-provisioning ratio.
	overprovision float64
	// jobs are this process's long data work: copies and wipes (jobs.go).
	jobs jobs
	// activations serialise the decisions on one volume's activation
	// (activation.go).
	activations keylock.Set
	// background: calls that start long data work answer ErrDataPending
	// after waiting dataGrace, instead of waiting for its end.
	background bool
	dataGrace  time.Duration
	// wipeChunk is the bytes one zeroing command covers; progressEvery
	// how often long data work records its progress (see progress.go).
	wipeChunk     int64
	progressEvery time.Duration
	// applyLimits is the node's (Config.ApplyLimits); nil in a process
	// without a node.
	applyLimits LimitsApplier
	// layers are the node's devices above volumes (Config.Layers); nil in
	// a process without a node.
	layers Layers
	// metaReads: the snapshots' block metadata reads, which a deletion
	// stops (blocks.go).
	metaReads keylock.Readers
	// remote receives other nodes' snapshots (Config.Remote).
	remote Remote
}

// Config is what a Manager is made of (NewManager): its whole
// configuration, fixed for its life.
type Config struct {
	// LVM runs lvm2 (*lvm.Client, or an lvm.Cache over one; unit tests
	// give a fake); Wiper zeroes deleted LVs.
	LVM   LVM
	Wiper Wiper
	// Cache is LVM's report cache, when LVM is an lvm.Cache: the same
	// one. nil (unit tests' fakes): queries read through LVM, and Probe
	// reads every VG.
	Cache ReportCache
	// Copier copies data into thick snapshots, clones and restores; nil:
	// DeviceCopier (tests give a stand-in for devices that do not exist).
	Copier Copier
	// Node is this node's ID; VolumeGroups are the VGs it serves, the
	// first the default.
	Node         string
	VolumeGroups []string
	// MaxPublished makes PublishVolume refuse a volume beyond this many
	// published at once on this node (the attach limit the node
	// advertises); 0: no limit.
	MaxPublished int
	// Overprovision is the thin over-provisioning ratio; 0:
	// volume.DefaultOverprovision, and below 1 it is 1.
	Overprovision float64
	// BackgroundDataWork makes CreateVolume (when it must copy data into
	// the new volume) and DeleteVolume (when it must wipe) wait at most
	// DataGrace for that work, then answer a *volume.PendingError while
	// the work goes on; the next call of the same volume joins the work,
	// or returns its outcome. Without it (standalone mode) those calls
	// return only when the work is done: CSI expects CreateVolume of a
	// clone to succeed in one call, and the driver's per-volume lock
	// answers ABORTED to the CO's retries meanwhile. The node agent sets
	// it, so that a copy of hours does not hold one of its workers.
	BackgroundDataWork bool
	DataGrace          time.Duration
	// Layers are the node's devices above its volumes' LVs (layers.go);
	// nil in a process without a node (a controller): a snapshot is then
	// lvm2's alone.
	Layers Layers
	// ApplyLimits puts a published volume's changed IO limits on the pods
	// using it (ModifyVolume): the node's (csi.Node.ApplyLimits); nil in a
	// process without a node, where a change of limits is recorded only,
	// and the node applies it when it next publishes the volume.
	ApplyLimits LimitsApplier
	// Remote receives another node's snapshot for a volume restored from
	// it on this node (remote.go): the node agent's transfer client. nil
	// (standalone mode, or transfers off): such a snapshot is not found.
	Remote Remote
}

// NewManager makes the Manager of cfg.
func NewManager(cfg Config) *Manager {
	m := &Manager{lvm: cfg.LVM, cache: cfg.Cache, wiper: cfg.Wiper, copier: cfg.Copier, node: cfg.Node, vgs: slices.Clone(cfg.VolumeGroups),
		maxPublished: cfg.MaxPublished, overprovision: cfg.Overprovision, background: cfg.BackgroundDataWork,
		dataGrace: max(cfg.DataGrace, 0), layers: cfg.Layers, applyLimits: cfg.ApplyLimits, remote: cfg.Remote,
		wipeChunk: defaultWipeChunk, progressEvery: defaultProgressEvery}
	if m.copier == nil {
		m.copier = DeviceCopier{}
	}
	switch {
	case m.overprovision == 0:
		m.overprovision = volume.DefaultOverprovision
	case m.overprovision < 1:
		m.overprovision = 1
	}
	return m
}

// Node is the node this manager serves.
func (m *Manager) Node() string { return m.node }

// VolumeGroups are the VGs this manager serves.
func (m *Manager) VolumeGroups() []string { return slices.Clone(m.vgs) }

// readVG reads a served VG. lvm2 cannot find a VG whose PVs are all
// missing or failing: for a VG this node serves that means unreadable
// (UNAVAILABLE: come back later), not "not found".
func (m *Manager) readVG(ctx context.Context, r lvm.Reads, name string) (lvm.VG, error) {
	vg, err := m.lvm.GetVG(ctx, r, name)
	if errors.Is(err, lvm.ErrNotFound) {
		// %v: lvm's "not found" must not reach callers that test for it.
		return lvm.VG{}, fmt.Errorf("volume group %s cannot be read, its disks may be missing or failing (%v): %w", name, err, volume.ErrVGUnreadable) //nolint:errorlint // see above
	}
	return vg, err
}

// changeableVG reads a served VG that a call is about to change. With a
// PV missing, lvm2 refuses lvcreate and lvextend but takes tag changes and
// lvremove, and then records the PV as missing in the VG's metadata: when
// the disk comes back the VG stays partial, every lvcreate still refused,
// until an administrator runs `vgextend --restoremissing` (found on real
// disks by test/faults). So Carve changes nothing of such a VG: the call is
// UNAVAILABLE, and its retry goes through once the disk is back.
func (m *Manager) changeableVG(ctx context.Context, r lvm.Reads, name string) (lvm.VG, error) {
	vg, err := m.readVG(ctx, r, name)
	if err != nil {
		return lvm.VG{}, err
	}
	if vg.MissingPVCount > 0 || vg.Partial {
		return lvm.VG{}, pvsMissing(name, vg.MissingPVCount)
	}
	return vg, nil
}

// changeableLV is changeableVG for a call that has read the LV it is about
// to change, or one of its VG (a thin pool): lvs reports the VG's missing
// PVs with each LV (vg_missing_pv_count), so that report tells it without
// a vgs of its own. It must be a report read for the call, not a cached
// one (see lvm.Cache).
func changeableLV(lv lvm.LV) error {
	if lv.VGMissingPVs > 0 {
		return pvsMissing(lv.VGName, lv.VGMissingPVs)
	}
	return nil
}

func pvsMissing(vg string, n int) error {
	return fmt.Errorf("volume group %s misses %d physical volume(s); Carve changes none of its LVs until they are back: %w",
		vg, n, lvm.ErrPVMissing)
}

func (m *Manager) checkVG(vg string) error {
	if !slices.Contains(m.vgs, vg) {
		return fmt.Errorf("volume group %q (this node serves %v): %w", vg, m.vgs, volume.ErrUnmanagedVG)
	}
	return nil
}

// lookupLV finds the LV behind id on this node; a missing one is
// ErrVolumeNotFound (callers looking for snapshots translate).
func (m *Manager) lookupLV(ctx context.Context, r lvm.Reads, id volume.ID) (lvm.LV, error) {
	if id.Node != m.node {
		return lvm.LV{}, fmt.Errorf("%s lives on node %q, this is %q: %w", id, id.Node, m.node, volume.ErrVolumeNotFound)
	}
	if err := m.checkVG(id.VG); err != nil {
		return lvm.LV{}, fmt.Errorf("%s: %w", id, volume.ErrVolumeNotFound)
	}
	lv, err := m.lvm.GetLV(ctx, r, id.VG, id.LV)
	if errors.Is(err, lvm.ErrNotFound) {
		// lvm2 says "not found" of an LV in a VG it cannot read at all
		// (every PV missing or failing): that is no answer.
		if _, vgErr := m.readVG(ctx, r, id.VG); vgErr != nil {
			return lvm.LV{}, fmt.Errorf("%s: %w", id, vgErr)
		}
	}
	if errors.Is(err, lvm.ErrNotFound) || errors.Is(err, lvm.ErrInvalidName) {
		return lvm.LV{}, fmt.Errorf("%s: %w", id, volume.ErrVolumeNotFound)
	}
	if err == nil && lv.Hidden {
		// An internal LV (a pool's data or metadata, a raid leg): never a
		// volume, whatever tags it might carry.
		return lvm.LV{}, fmt.Errorf("%s is an internal LV: %w", id, volume.ErrVolumeNotFound)
	}
	return lv, err
}

// lookup finds the managed volume LV behind id on this node. A snapshot's
// ID is no volume.
func (m *Manager) lookup(ctx context.Context, r lvm.Reads, id volume.ID) (lvm.LV, error) {
	lv, err := m.lookupLV(ctx, r, id)
	if err != nil {
		return lvm.LV{}, err
	}
	if isSnapshot(lv) {
		return lvm.LV{}, fmt.Errorf("%s is a snapshot, not a volume: %w", id, volume.ErrVolumeNotFound)
	}
	if !isManaged(lv) {
		return lvm.LV{}, fmt.Errorf("volume %s: %w", id, volume.ErrNotManaged)
	}
	return lv, nil
}

// lookupSettled is lookup of a volume that is neither half created nor
// being deleted: what every operation on an existing volume needs. Such a
// volume is not found, as far as callers can tell: a create's retry
// finishes it, a delete's retry removes it.
func (m *Manager) lookupSettled(ctx context.Context, r lvm.Reads, id volume.ID) (lvm.LV, error) {
	lv, err := m.lookup(ctx, r, id)
	if err != nil {
		return lvm.LV{}, err
	}
	if !isSettled(lv) {
		return lvm.LV{}, fmt.Errorf("volume %s is being created or deleted: %w", id, volume.ErrVolumeNotFound)
	}
	return lv, nil
}

// GetVolume returns a settled volume, read as r says: its caller decides
// whether it is a query (lvm.Cached): NodeGetVolumeStats and
// ControllerGetVolume are, and so are the node's publish, unpublish and
// unstage, with a fresh read when the cached one refuses (csi's
// resolveStaged); the node's stage reads afresh, once for the volume and
// its pool (lvm.Shared); the health RPCs read afresh (lvm.Fresh).
func (m *Manager) GetVolume(ctx context.Context, r lvm.Reads, id volume.ID) (volume.Volume, error) {
	lv, err := m.lookupSettled(ctx, r, id)
	if err != nil {
		return volume.Volume{}, err
	}
	vol := m.volumeOf(lv)
	if lv.PoolLV != "" {
		if pool, err := m.lvm.GetLV(ctx, r, id.VG, lv.PoolLV); err == nil {
			vol.Health = append(vol.Health, poolHealth(pool)...)
		}
	}
	return vol, nil
}

// ListVolumes returns every settled volume on this node, sorted by ID,
// read as r says (see GetVolume).
func (m *Manager) ListVolumes(ctx context.Context, r lvm.Reads) ([]volume.Volume, error) {
	var out []volume.Volume
	for _, vg := range m.vgs {
		vols, err := m.volumesIn(ctx, r, vg)
		if err != nil {
			return nil, fmt.Errorf("list volumes in %s: %w", vg, err)
		}
		out = append(out, vols...)
	}
	if len(m.vgs) > 1 {
		volume.SortByID(out, func(v volume.Volume) volume.ID { return v.ID })
	}
	return out, nil
}

// volumesIn lists the settled volumes of vg in ID order. A query's list
// comes from the cache's report, and is built once per report
// (Config.Cache): at a thousand volumes, building them was
// what each ListVolumes page cost. The caller gets its own copy.
func (m *Manager) volumesIn(ctx context.Context, r lvm.Reads, vg string) ([]volume.Volume, error) {
	build := func(lvs []lvm.LV) (any, error) { return buildVolumes(m, lvs), nil }
	if m.cache != nil && r.IsCached() {
		v, err := m.cache.DerivedFromLVs(ctx, r, vg, "volumes", build)
		if err != nil {
			return nil, err
		}
		return slices.Clone(v.([]volume.Volume)), nil
	}
	lvs, err := m.lvm.ListLVs(ctx, r, vg)
	if err != nil {
		return nil, err
	}
	return buildVolumes(m, lvs), nil
}

// buildVolumes makes the settled volumes of one VG's LVs, in ID order,
// with their thin pools' health.
func buildVolumes(m *Manager, lvs []lvm.LV) []volume.Volume {
	pools := map[string]lvm.LV{}
	for _, lv := range lvs {
		if lv.IsThinPool() {
			pools[lv.Name] = lv
		}
	}
	var out []volume.Volume
	for _, lv := range lvs {
		if lv.Hidden || !isSettled(lv) {
			continue
		}
		vol := m.volumeOf(lv)
		if pool, ok := pools[lv.PoolLV]; ok {
			vol.Health = append(vol.Health, poolHealth(pool)...)
		}
		out = append(out, vol)
	}
	volume.SortByID(out, func(v volume.Volume) volume.ID { return v.ID })
	return out
}

// Probe checks that every served volume group can be read. It is a
// query (lvm.Cached; see query.go): liveness probes come every few
// seconds, and a VG whose report has expired is read again, so an lvm2
// that hangs still fails the probe, within the cache's max age.
//
// A VG one of whose commands succeeded within livenessProof is not read
// at all (lvm.Cache.Alive): lvm2 is demonstrably reading and changing it.
// Reading it would mean waiting for its lock behind every command Carve
// has queued: 50 claims at once on the e2e's emulated node kept Carve's
// commands coming back to back, the probe's own vgs waited past the
// probe's 10 s three times in a row, and kubelet restarted carve node in
// the middle of that work. A hung lvm2 completes nothing, so the probe
// then reads, and fails, as before.
func (m *Manager) Probe(ctx context.Context) error {
	for _, vg := range m.vgs {
		if m.cache != nil && m.cache.Alive(vg, livenessProof) {
			continue
		}
		if _, err := m.lvm.GetVG(ctx, lvm.Cached, vg); err != nil {
			return fmt.Errorf("volume group %s: %w", vg, err)
		}
	}
	return nil
}

// livenessProof is how recent a successful lvm2 command of a VG must be
// for Probe to take it as proof that the VG can be read: the node's
// liveness probe comes every 30 s (deploy/).
const livenessProof = 30 * time.Second

// StorageHealth reports trouble with the served volume groups: one that
// cannot be read is Inaccessible, one with missing PVs Degraded (as Space
// reports them for the node's NodeStorage). It reads lvm2 afresh: health
// must show a failed disk now.
func (m *Manager) StorageHealth(ctx context.Context) []volume.Problem {
	var out []volume.Problem
	for _, name := range m.vgs {
		vg, err := m.lvm.GetVG(ctx, lvm.Fresh, name)
		if err != nil {
			out = append(out, vgUnreadable(fmt.Sprintf("volume group %s: %v", name, err)))
			continue
		}
		out = append(out, vgHealth(name, vg)...)
	}
	return out
}

// Start-up repairs: what the kill that stopped the last carve left (its
// lvm2 children die with it), repaired once when carve starts, before it
// serves anything, in this order: ResumeSuspendedLayers,
// RepairInterruptedLVM, MakeMissingDeviceNodes, ReleaseMetadataSnapshots. A VG that cannot be read
// is logged and left to the calls that need it.

// ResumeSuspendedLayers resumes the node's layers a kill left suspended
// inside a snapshot's window (Layers.ResumeLeftovers). It goes before any
// lvm2 command: one would hang reading a suspended layer.
func (m *Manager) ResumeSuspendedLayers(ctx context.Context) {
	if m.layers != nil {
		if _, err := m.layers.ResumeLeftovers(ctx); err != nil {
			klog.ErrorS(err, "Could not resume the volumes' layers left suspended")
		}
	}
}

// RepairInterruptedLVM resumes the devices of the served VGs that a killed
// lvm2 command left suspended, dropping tables it loaded but never made
// live (lvm.Client.RepairInterrupted): a suspended device blocks the I/O
// of a published volume for good.
func (m *Manager) RepairInterruptedLVM(ctx context.Context) {
	for _, vg := range m.vgs {
		if _, err := m.lvm.RepairInterrupted(ctx, vg); err != nil {
			klog.ErrorS(err, "Could not repair what an interrupted lvm2 command left", "vg", vg)
		}
	}
}

// MakeMissingDeviceNodes makes the missing /dev nodes of the served VGs'
// active LVs: an activation cut short by a kill leaves an LV active
// without its node where no udev runs, and every later open of it would
// fail, since Carve takes a reported-active LV as ready to open (a
// restore's copy from its snapshot, found so by the soak).
func (m *Manager) MakeMissingDeviceNodes(ctx context.Context) {
	for _, vg := range m.vgs {
		if err := m.lvm.MakeNodes(ctx, vg); err != nil {
			klog.ErrorS(err, "Could not make the device nodes of the volume group's active LVs", "vg", vg)
		}
	}
}

// ReleaseMetadataSnapshots releases the thin pools' metadata snapshots a
// kill left reserved mid-read (blocks.go): now rather than at the next
// read, so that a pool's metadata is not held for nothing meanwhile.
func (m *Manager) ReleaseMetadataSnapshots(ctx context.Context) {
	for _, vg := range m.vgs {
		if _, err := m.lvm.ReleaseMetadataSnaps(ctx, vg); err != nil {
			klog.ErrorS(err, "Could not release the thin pools' metadata snapshots left reserved", "vg", vg)
		}
	}
}

// findLV reads LV name of vg, which may well not exist: found is false
// with a nil error then, and with the error of a failed read.
func (m *Manager) findLV(ctx context.Context, r lvm.Reads, vg, name string) (lv lvm.LV, found bool, err error) {
	lv, err = m.lvm.GetLV(ctx, r, vg, name)
	if errors.Is(err, lvm.ErrNotFound) {
		return lv, false, nil
	}
	return lv, err == nil, err
}
