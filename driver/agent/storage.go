package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/metrics"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// StorageReporter publishes the node's volume groups in its NodeStorage
// resource, so that the controller answers GetCapacity with no LVM call and
// csi-provisioner's capacity tracking keeps pods off nodes that cannot fit
// their volumes.
type StorageReporter struct {
	Client client.Client
	Node   string
	// Space reads the served VGs (lvmvol.Manager.Space).
	Space func(ctx context.Context) ([]volume.VGSpace, error)
	// Overprovision is the node's thin over-provisioning ratio.
	Overprovision float64
	// Interval between reports; 0 means 30 s.
	Interval time.Duration
	// Heartbeat: a report that changed nothing is written anyway once the
	// last write is this old, so UpdateTime shows the agent alive; 0
	// means 10 min. Between, an idle node writes nothing.
	Heartbeat time.Duration
	// Volumes lists Carve's volumes on the node (lvmvol.Manager.ListVolumes),
	// as fresh as r says, to find orphans and to keep the LogicalVolumes'
	// health; nil skips both.
	Volumes func(ctx context.Context, r lvm.Reads) ([]volume.Volume, error)

	// Events records a Warning for each new orphan (on the NodeStorage),
	// missing LV (on its LogicalVolume) and health problem (a VG's on the
	// NodeStorage, a volume's on its LogicalVolume), and a Normal one when
	// a problem clears; nil records none.
	Events events.EventRecorder

	// mu makes reports and refreshes (RefreshSpace, from the
	// reconcilers' workers) one at a time: they share the audit's state
	// below and write the same status.
	mu        sync.Mutex
	suspects  map[string]bool // unmatched by the previous report
	confirmed time.Time       // the audit's last fresh read
}

// Start reports now and then every Interval until ctx ends (a
// controller-runtime Runnable). A failed report is logged and retried.
func (s *StorageReporter) Start(ctx context.Context) error {
	repeat(ctx, cmp.Or(s.Interval, 30*time.Second), s.Report, func(err error) {
		klog.ErrorS(err, "Storage report failed", "node", s.Node)
	})
	return nil
}

// repeat runs pass now and then every interval until ctx ends, handing
// each failure to failed: a pass that fails is retried at the next.
func repeat(ctx context.Context, every time.Duration, pass func(context.Context) error, failed func(error)) {
	for {
		if err := pass(ctx); err != nil {
			failed(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func (s *StorageReporter) heartbeat() time.Duration {
	if s.Heartbeat == 0 {
		return 10 * time.Minute
	}
	return s.Heartbeat
}

// Report reads the node's storage now, and writes it if it changed (or at
// the heartbeat); then it brings the health in its LogicalVolumes' status
// up to date (syncHealth). Reading costs no LVM command at idle: Space and
// Volumes are queries (lvm.Cached), answered from the Manager's cached
// reports; every 30 s.
//
// A failed audit (a VG that cannot be read fails the listing of volumes)
// leaves the last findings standing, and the VGs are reported all the
// same: an unreadable VG shows as such.
func (s *StorageReporter) Report(ctx context.Context) error {
	return s.withSpace(ctx, func(space []volume.VGSpace) error { return s.report(ctx, space) })
}

// report is Report's work on the space read.
func (s *StorageReporter) report(ctx context.Context, space []volume.VGSpace) error {
	ns, err := s.nodeStorage(ctx)
	if err != nil {
		return err
	}
	findings, read, auditErr := s.audit(ctx)
	orphans, missing := ns.Status.OrphanedVolumes, ns.Status.MissingVolumes
	if auditErr == nil {
		orphans, missing = split(findings)
		s.announce(ctx, &ns, findings, orphans, missing)
	}
	s.announceVGHealth(&ns, space)
	next := v1alpha1.NodeStorageStatus{
		VolumeGroups:       vgStatuses(space),
		OverprovisionRatio: strconv.FormatFloat(s.Overprovision, 'f', -1, 64),
		UpdateTime:         ns.Status.UpdateTime,
		OrphanedVolumes:    orphans,
		MissingVolumes:     missing,
		DiskRefusals:       ns.Status.DiskRefusals,    // the disk setup's (SetDiskRefusals)
		TransferAddress:    ns.Status.TransferAddress, // the transfer service's (SetTransferAddress)
	}
	if err := s.write(ctx, &ns, next); err != nil || auditErr != nil {
		return errors.Join(auditErr, err)
	}
	return s.syncHealth(ctx, read)
}

// RefreshSpace writes the node's VGs as they are now into its NodeStorage,
// the rest of its status as the last report left it. The reconcilers call
// it after each change that takes or frees space, before they report the
// change done (VolumeReconciler.SpaceChanged): the controller answers
// GetCapacity from the NodeStorage, and csi-provisioner asks again for
// the node's capacity as soon as CreateVolume or DeleteVolume returns, so
// its CSIStorageCapacity, and with it the scheduler, sees the change
// then. Left to the periodic report, the space freed by a deletion showed
// up to 30 s later, and csi-provisioner's next poll a minute after that
// (86 s measured in the e2e's TestPlacementFollowsCapacity), while pods
// were kept off a node that had the room. Reading the space after Carve's
// own change runs one vgs (lvm.Cache dropped the VG's report).
func (s *StorageReporter) RefreshSpace(ctx context.Context) error {
	// Changes in a row write in a row, and the cache the NodeStorage is
	// read from may not hold the last write yet: its conflict is retried
	// on the cache's next view (client-go's retry, about 1.5 s in all).
	return s.withSpace(ctx, func(space []volume.VGSpace) error {
		_, _, err := s.rewrite(ctx, space, func(*v1alpha1.NodeStorageStatus) {})
		return err
	})
}

// rewrite writes the VGs of space into the node's NodeStorage, and what
// edit changes of the rest of its status, the rest as the last write
// left it. It returns the NodeStorage as written, and its status before.
// A conflict is retried on a fresh read (client-go's retry).
func (s *StorageReporter) rewrite(ctx context.Context, space []volume.VGSpace, edit func(*v1alpha1.NodeStorageStatus)) (
	ns v1alpha1.NodeStorage, was v1alpha1.NodeStorageStatus, err error) {
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var err error
		if ns, err = s.nodeStorage(ctx); err != nil {
			return err
		}
		was = ns.Status
		next := *ns.Status.DeepCopy()
		next.VolumeGroups = vgStatuses(space)
		edit(&next)
		return s.write(ctx, &ns, next)
	})
	return ns, was, err
}

// withSpace reads the served VGs, sets their metrics and runs f on them,
// one report or refresh at a time (mu).
func (s *StorageReporter) withSpace(ctx context.Context, f func([]volume.VGSpace) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	space, err := s.Space(ctx)
	if err != nil {
		return err
	}
	s.gauge(space)
	return f(space)
}

// gauge sets the metrics of the VGs read; an unreadable one (no size) has
// none to set, and keeps its last.
func (s *StorageReporter) gauge(space []volume.VGSpace) {
	for _, vg := range space {
		if vg.Size == 0 {
			continue
		}
		metrics.VolumeGroup(s.Node, vg.Name, vg.Size, vg.Free)
		metrics.VolumeGroupMetadata(s.Node, vg.Name, vg.MetadataSize, vg.MetadataFree)
		for _, p := range vg.Pools {
			metrics.ThinPool(s.Node, vg.Name, p.Name, p.DataPercent, p.MetadataPercent)
		}
	}
}

// nodeStorage gets the node's NodeStorage, or creates it.
//
// The client may read from a cache that lags: a NodeStorage it does not
// show yet is created, and one that exists already is reported on by the
// next report, once the cache has it. Create returns the object as the API
// holds it, so its status can be written at once.
func (s *StorageReporter) nodeStorage(ctx context.Context) (v1alpha1.NodeStorage, error) {
	var ns v1alpha1.NodeStorage
	err := s.Client.Get(ctx, types.NamespacedName{Name: s.Node}, &ns)
	if apierrors.IsNotFound(err) {
		ns = v1alpha1.NodeStorage{ObjectMeta: metav1.ObjectMeta{Name: s.Node}}
		err = s.Client.Create(ctx, &ns)
		if apierrors.IsAlreadyExists(err) {
			return ns, fmt.Errorf("NodeStorage %s exists but is not in the cache yet; the next report updates it", s.Node)
		}
	}
	if err != nil {
		return ns, fmt.Errorf("get or create NodeStorage %s: %w", s.Node, err)
	}
	return ns, nil
}

// write writes next as ns's status, unless it says nothing new and the
// heartbeat is not due: the API server and every watcher are spared it.
func (s *StorageReporter) write(ctx context.Context, ns *v1alpha1.NodeStorage, next v1alpha1.NodeStorageStatus) error {
	if equality.Semantic.DeepEqual(next, ns.Status) && time.Since(ns.Status.UpdateTime.Time) < s.heartbeat() {
		return nil
	}
	next.UpdateTime = metav1.Now()
	ns.Status = next
	if err := s.Client.Status().Update(ctx, ns); err != nil {
		return fmt.Errorf("update NodeStorage %s: %w", s.Node, err)
	}
	return nil
}

// audit compares the node's LVs with its LogicalVolumes, both ways:
// orphans are Carve's LVs that no LogicalVolume claims, missing are
// LogicalVolumes the agent carved ("VG/LV") whose LV is gone. Neither is
// ever repaired here: an orphan may hold data, and a missing LV is not
// recreated blank; both are reported (status, events, metrics, log) for an
// administrator to decide.
//
// A LogicalVolume exists before its LV is created and is gone only after
// its LV is removed (finalizer), so an LV without one is an orphan: its
// resource was deleted by force, released from a node declared lost
// (driver/nodeloss), or it was made by hand or by standalone mode. And a
// resource has a volume ID only once its LV exists, and keeps its LV until
// its deletion starts, so one with an ID, not being deleted, and no LV has
// lost its LV behind Carve's back. One reading can still race: the LVs are
// listed first, then the resources, and a volume created or deleted in
// between looks unmatched. Such a volume is matched by the next report, so
// only what is seen unmatched twice in a row is reported.
//
// It returns what it read too, for syncHealth.
func (s *StorageReporter) audit(ctx context.Context) (map[string]*v1alpha1.LogicalVolume, reading, error) {
	if s.Volumes == nil {
		return nil, reading{}, nil
	}
	vols, err := s.Volumes(ctx, lvm.Cached)
	if err != nil {
		return nil, reading{}, fmt.Errorf("audit: list volumes: %w", err)
	}
	claimed, err := s.claimed(ctx)
	if err != nil {
		return nil, reading{}, err
	}
	read := reading{vols: vols, claimed: claimed}
	unmatched := match(vols, claimed)
	// The LVs were a query's, read from lvm.Cache, which Carve's own
	// changes keep exact and which sees an administrator's lvremove (of
	// an orphan) or a restored LV at the next query (the VG's print);
	// a finding is serious enough to check against lvm2 itself, so while
	// there are findings they are confirmed on a fresh report every
	// confirmEvery; a node with none runs no lvm2 command here.
	if len(unmatched) > 0 && time.Since(s.confirmed) >= confirmEvery {
		if read.vols, err = s.Volumes(ctx, lvm.Fresh); err != nil {
			return nil, reading{}, fmt.Errorf("audit: list volumes afresh: %w", err)
		}
		s.confirmed, read.fresh = time.Now(), true
		unmatched = match(read.vols, claimed)
	}
	findings := map[string]*v1alpha1.LogicalVolume{}
	for key, lv := range unmatched {
		if s.suspects[key] {
			findings[key] = lv
		}
	}
	s.suspects = map[string]bool{}
	for key := range unmatched {
		s.suspects[key] = true
	}
	return findings, read, nil
}

// reading is what an audit read: the node's volumes (afresh, or from the
// cache), and its LogicalVolumes by "VG/LV".
type reading struct {
	vols    []volume.Volume
	claimed map[string]*v1alpha1.LogicalVolume
	fresh   bool
}

// claimed lists the node's LogicalVolumes by "VG/LV". In carve node the
// client reads the node's cache, which holds only this node's
// LogicalVolumes: no API call.
func (s *StorageReporter) claimed(ctx context.Context) (map[string]*v1alpha1.LogicalVolume, error) {
	var list v1alpha1.LogicalVolumeList
	if err := s.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list LogicalVolumes: %w", err)
	}
	claimed := map[string]*v1alpha1.LogicalVolume{}
	for i := range list.Items {
		if lv := &list.Items[i]; lv.Spec.NodeName == s.Node {
			claimed[lv.Spec.VolumeGroup+"/"+lv.Name] = lv
		}
	}
	return claimed, nil
}

// split sorts findings into orphans and missing LVs, each in order.
func split(findings map[string]*v1alpha1.LogicalVolume) (orphans, missing []string) {
	for key, lv := range findings {
		if lv == nil {
			orphans = append(orphans, key)
		} else {
			missing = append(missing, key)
		}
	}
	slices.Sort(orphans)
	slices.Sort(missing)
	return orphans, missing
}

// confirmEvery paces the fresh reads that confirm the audit's findings.
const confirmEvery = 2 * time.Minute

// match returns the unmatched "VG/LV"s: an orphan with a nil resource, a
// missing LV with its resource.
func match(vols []volume.Volume, claimed map[string]*v1alpha1.LogicalVolume) map[string]*v1alpha1.LogicalVolume {
	out := map[string]*v1alpha1.LogicalVolume{}
	present := map[string]bool{}
	for _, v := range vols {
		key := v.ID.VG + "/" + v.ID.LV
		present[key] = true
		if claimed[key] == nil {
			out[key] = nil
		}
	}
	for key, lv := range claimed {
		if !present[key] && lv.Status.VolumeID != "" && lv.DeletionTimestamp.IsZero() {
			out[key] = lv
		}
	}
	return out
}

// announce logs, counts and records events for what the audit found that
// the last written status did not hold, so that each finding is told
// once, not every 30 s.
func (s *StorageReporter) announce(ctx context.Context, ns *v1alpha1.NodeStorage, findings map[string]*v1alpha1.LogicalVolume, orphans, missing []string) {
	metrics.UnmatchedVolumes(s.Node, len(orphans), len(missing))
	for _, key := range orphans {
		if slices.Contains(ns.Status.OrphanedVolumes, key) {
			continue
		}
		klog.InfoS("Orphaned volume: an LV of Carve's with no LogicalVolume; left in place", "node", s.Node, "lv", key)
		// Related: the LogicalVolume this LV lacks, named as the LV (as
		// Carve names them), so that each orphan is an event of its own.
		_, lvName, _ := strings.Cut(key, "/")
		lacking := &v1alpha1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: lvName}}
		emitAbout(s.Events, ns, lacking, "Warning", ReasonOrphaned, "Audit",
			"LV %s on %s is Carve's but no LogicalVolume claims it; Carve leaves it in place: inspect it, then remove it (lvremove) or keep it", key, s.Node)
	}
	for _, key := range missing {
		if slices.Contains(ns.Status.MissingVolumes, key) {
			continue
		}
		lv := findings[key]
		if lv.Spec.RecreateBlankWhenLost {
			klog.InfoS("Missing volume: a LogicalVolume whose LV is gone; its class asks to recreate it blank", "node", s.Node, "lv", key, "logicalVolume", lv.Name)
			emit(s.Events, lv, "Warning", ReasonMissing, "Audit",
				"LV %s is gone from %s although this volume was carved; its class asks to recreate it blank (recreateBlankWhenLost)", key, s.Node)
			s.wake(ctx, lv)
			continue
		}
		klog.InfoS("Missing volume: a LogicalVolume whose LV is gone; not recreated", "node", s.Node, "lv", key, "logicalVolume", lv.Name)
		emit(s.Events, lv, "Warning", ReasonMissing, "Audit",
			"LV %s is gone from %s although this volume was carved; Carve does not recreate it blank: restore it from a snapshot or delete the volume", key, s.Node)
	}
}

// LostAnnotation marks when the audit found a LogicalVolume's LV lost.
const LostAnnotation = "lvm.carve.dev/lost-at"

// wake has the volume reconciler look at a LogicalVolume whose LV the
// audit found lost (and whose class asks to recreate it blank): nothing
// else changes on the resource when an LV goes, so the reconciler, which
// recreates it (VolumeReconciler.recreateBlank), would otherwise wait for
// the next change or resync. The annotation says when; a failure is
// logged, and the next finding of the same loss tries again.
func (s *StorageReporter) wake(ctx context.Context, lv *v1alpha1.LogicalVolume) {
	patch := client.MergeFrom(lv.DeepCopy())
	metav1.SetMetaDataAnnotation(&lv.ObjectMeta, LostAnnotation, time.Now().UTC().Format(time.RFC3339))
	if err := s.Client.Patch(ctx, lv, patch); err != nil {
		klog.ErrorS(err, "Waking the reconciler of a lost volume failed; the next audit tries again", "logicalVolume", lv.Name)
	}
}

func vgStatuses(space []volume.VGSpace) []v1alpha1.VolumeGroupStatus {
	out := make([]v1alpha1.VolumeGroupStatus, 0, len(space))
	for _, vg := range space {
		st := v1alpha1.VolumeGroupStatus{Name: vg.Name, SizeBytes: int64(vg.Size), FreeBytes: int64(vg.Free),
			ExtentSize: int64(vg.ExtentSize), MetadataSizeBytes: int64(vg.MetadataSize), MetadataFreeBytes: int64(vg.MetadataFree),
			Health: healthOf(vg.Health), Tags: slices.Clone(vg.Tags)}
		for _, f := range vg.PVFree {
			st.PVFreeBytes = append(st.PVFreeBytes, int64(f))
		}
		for _, p := range vg.Pools {
			st.ThinPools = append(st.ThinPools, v1alpha1.ThinPoolStatus{Name: p.Name, SizeBytes: int64(p.Size),
				FreeBytes: int64(p.Free), DataPercent: percent(p.DataPercent), MetadataPercent: percent(p.MetadataPercent)})
		}
		out = append(out, st)
	}
	return out
}

func percent(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }
