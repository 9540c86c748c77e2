// Package agent is the node agent of cluster mode: it watches the
// LogicalVolume resources of its own node and makes LVM match them, with the
// very semantics standalone mode uses (lvmvol.Manager), then reports back
// in their status.
//
// Crash safety: every step is an idempotent lvmvol call, so a reconcile can
// stop anywhere and the next one finishes the job. The finalizer keeps a
// resource until its LV is gone. An LV whose resource vanished is never
// removed by the agent (no data is lost to a deleted object); a resource
// whose LV vanished after it was Ready is reported Failed, never silently
// recreated blank.
//
// Concurrency: each reconciler runs Workers reconciles at once, and
// controller-runtime never hands one resource to two workers at a time, so
// calls of one volume stay serialized (as the driver's per-volume lock
// does in standalone mode) while different volumes proceed side by side.
// What the workers share is safe for that: the lvmvol.Manager (standalone
// mode calls it concurrently for different volumes already; its only
// mutable state, the data jobs, is under a mutex, and everything else
// lives in LVM, whose commands lock the VG themselves), the cached client
// and the event recorder (both made for concurrent use). Long data work
// (copies into clones and restores, wipes) runs in the Manager's
// background jobs (lvmvol.Config.BackgroundDataWork): a reconcile that
// finds it running reports the resource Copying or Wiping and looks again
// after dataPoll, so a copy of hours holds no worker.
package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// Volumes is the LVM semantics the agent applies: lvmvol.Manager.
type Volumes interface {
	CreateVolume(ctx context.Context, req volume.CreateRequest) (volume.Volume, error)
	// AdoptVolume takes over an existing LV for a resource that adopts it
	// (spec.adopted).
	AdoptVolume(ctx context.Context, id volume.ID) (volume.Volume, error)
	GetVolume(ctx context.Context, r lvm.Reads, id volume.ID) (volume.Volume, error)
	DeleteVolume(ctx context.Context, id volume.ID) error
	ExpandVolume(ctx context.Context, id volume.ID, requiredBytes, limitBytes int64) (volume.Volume, error)
	PublishVolume(ctx context.Context, id volume.ID, node string) (string, error)
	UnpublishVolume(ctx context.Context, id volume.ID, node string) error
	ModifyVolume(ctx context.Context, id volume.ID, m volume.Mutable) (volume.Volume, error)
	// CatchUp brings a volume restored from another node's snapshot base
	// to that node's later snapshot snap (spec.catchUpTo).
	CatchUp(ctx context.Context, id, base, snap volume.ID) error
}

// DefaultWorkers is how many resources of a kind the agent reconciles at
// once unless told otherwise (carve node --agent-workers).
const DefaultWorkers = 4

// DataGrace is how long a reconcile waits for the long data work it
// starts before it leaves the work in the background
// (lvmvol.Config.BackgroundDataWork): small volumes are done in one
// reconcile, and a worker is held no longer than this.
const DataGrace = 3 * time.Second

// dataPoll is how soon a volume whose data is still being copied or wiped
// in the background is looked at again (nothing else would trigger a
// reconcile).
const dataPoll = 5 * time.Second

// VolumeReconciler reconciles the LogicalVolumes of one node.
type VolumeReconciler struct {
	Client  client.Client
	Node    string
	Volumes Volumes
	// Events, when set, records what the agent did and what failed.
	Events events.EventRecorder
	// Workers is how many volumes are reconciled at once; 0 means
	// DefaultWorkers.
	Workers int
	// SpaceChanged, when set, writes the node's space to its NodeStorage
	// now (StorageReporter.RefreshSpace). It runs after a change that took
	// or freed space, before the change is reported done: a carve or a
	// growth before the status says Ready, a deletion before the finalizer
	// goes, so that capacity is current when the controller's call returns.
	SpaceChanged func(ctx context.Context) error
}

// Reconcile makes the LV of one LogicalVolume match its spec.
func (r *VolumeReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var lv v1alpha1.LogicalVolume
	if err := r.Client.Get(ctx, req.NamespacedName, &lv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if lv.Spec.NodeName != r.Node {
		return ctrl.Result{}, nil
	}
	if !lv.DeletionTimestamp.IsZero() {
		return outcome(r.remove(ctx, &lv))
	}
	if controllerutil.AddFinalizer(&lv, v1alpha1.VolumeFinalizer) {
		if err := r.Client.Update(ctx, &lv); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to %s: %w", lv.Name, err)
		}
	}
	vol, err := r.apply(ctx, &lv)
	return outcome(r.report(ctx, &lv, vol, err))
}

// outcome: long data work still running is no failure (its state is in
// the status already): the resource is looked at again after dataPoll,
// without the growing backoff of a failure. Anything else is returned for
// controller-runtime to retry with backoff.
func outcome(err error) (ctrl.Result, error) {
	if errors.Is(err, volume.ErrDataPending) {
		return ctrl.Result{RequeueAfter: dataPoll}, nil
	}
	return ctrl.Result{}, err
}

// volumeID is the CSI ID the resource's LV has (or will have): the
// resource is named as its LV (volume.LVName of the CSI name, or an
// adopted LV's own name).
func volumeID(lv *v1alpha1.LogicalVolume) volume.ID {
	return volume.ID{Node: lv.Spec.NodeName, VG: lv.Spec.VolumeGroup, LV: lv.Name}
}

// errVanished: a volume that was Ready has no LV any more.
var errVanished = errors.New("logical volume vanished")

// apply runs the idempotent steps: create, grow, (un)publish, modify.
func (r *VolumeReconciler) apply(ctx context.Context, lv *v1alpha1.LogicalVolume) (volume.Volume, error) {
	vol, err := r.carve(ctx, lv)
	if err != nil {
		return vol, err
	}
	if err := r.catchUp(ctx, lv, vol); err != nil {
		return vol, err
	}
	if vol, err = r.publish(ctx, lv, vol); err != nil {
		return vol, err
	}
	return r.modify(ctx, lv, vol)
}

// modify brings a carved LV to the spec's mutable parameters when they
// differ from what the status says it was brought to (status.mirrors);
// a fresh LV was carved with them. It runs after the publish, so that a
// pod waits for no raid1 sync; an unpublished LV is held for it and left
// unpublished (lvmvol.ModifyVolume). A sync that runs on is reported
// Syncing and looked at again, as copies are.
//
// A write cache goes the same way (status.writeCache), after the legs.
//
// IO limits go the same way (status.ioLimits): lvmvol records them on the
// LV and has this node's CSI service put them on the pods using the
// volume (lvmvol.Config.ApplyLimits).
func (r *VolumeReconciler) modify(ctx context.Context, lv *v1alpha1.LogicalVolume, vol volume.Volume) (volume.Volume, error) {
	if lv.Status.VolumeID == "" {
		return vol, nil
	}
	var m volume.Mutable
	if want := lv.Spec.Type.Mirrors; lv.Status.Mirrors != want {
		m.Mirrors = &want
	}
	if lv.Status.IOLimits != lv.Spec.IOLimits {
		l := lv.Spec.IOLimits.Volume()
		m.ReadBPS, m.WriteBPS, m.ReadIOPS, m.WriteIOPS = &l.ReadBPS, &l.WriteBPS, &l.ReadIOPS, &l.WriteIOPS
	}
	if !lv.Status.WriteCache.Same(lv.Spec.WriteCache) {
		m.WriteCache = lv.Spec.WriteCache.Volume()
	}
	if m.IsZero() {
		return vol, nil
	}
	return r.Volumes.ModifyVolume(ctx, vol.ID, m)
}

// carve creates the LV, or finds it, and grows it to the spec's size.
func (r *VolumeReconciler) carve(ctx context.Context, lv *v1alpha1.LogicalVolume) (volume.Volume, error) {
	id := volumeID(lv)
	if lv.Spec.Adopted && lv.Status.VolumeID == "" {
		return r.Volumes.AdoptVolume(ctx, id)
	}
	vol, err := r.Volumes.GetVolume(ctx, lvm.Fresh, id)
	switch {
	case err == nil:
		// It exists: the spec may have grown since, which is an
		// expansion, not a create with other arguments.
	case !errors.Is(err, volume.ErrVolumeNotFound):
		return vol, err
	case lv.Status.VolumeID != "" && lv.Spec.RecreateBlankWhenLost:
		return r.recreateBlank(ctx, lv)
	case lv.Status.VolumeID != "":
		// It existed once (and a later reconcile must not forget that
		// because the last one reported Failed).
		return vol, fmt.Errorf("%s existed and is gone; not recreating it blank (its class does not ask for it: %s): %w: %w",
			id, "recreateBlankWhenLost", errVanished, err)
	default:
		req, err := createRequest(lv.Spec)
		if err != nil {
			return vol, err
		}
		if vol, err = r.Volumes.CreateVolume(ctx, req); err != nil {
			return vol, err
		}
	}
	if lv.Spec.RequiredBytes > vol.SizeBytes {
		if vol, err = r.Volumes.ExpandVolume(ctx, vol.ID, lv.Spec.RequiredBytes, 0); err != nil {
			return vol, err
		}
	}
	return vol, nil
}

// recreateBlank carves a lost volume's LV again, blank, as its class
// asks (spec.recreateBlankWhenLost): for workloads that rebuild their
// own data from replicas, a blank volume in place lets the pod start,
// where a missing one keeps it stuck. Lost means what carve says: the LV
// is not found (lvm.Fresh) in a VG lvm2 reads whole; a VG it cannot
// read, or one missing a PV, answers otherwise (lookupLV, changeableVG),
// so a disk that is merely absent never gets its volumes recreated. The
// new LV has the last known size, none of the source's data (a restore
// or clone starts blank too) and, like any new volume, is zeroed and
// inactive; publish activates it where the spec says. NodeStage formats
// it, since it is blank. Crash safety is CreateVolume's: a retry finds
// the LV this call made. The status keeps the volume ID; the write cache
// the status records is forgotten, so that modify attaches it again.
func (r *VolumeReconciler) recreateBlank(ctx context.Context, lv *v1alpha1.LogicalVolume) (volume.Volume, error) {
	spec := lv.Spec
	spec.Source = nil
	spec.RequiredBytes = max(spec.RequiredBytes, lv.Status.SizeBytes)
	req, err := createRequest(spec)
	if err != nil {
		return volume.Volume{}, err
	}
	vol, err := r.Volumes.CreateVolume(ctx, req)
	if err != nil {
		return vol, fmt.Errorf("recreate lost %s blank: %w", volumeID(lv), err)
	}
	lv.Status.WriteCache = nil
	klog.InfoS("Recreated a lost volume blank, as its class asks (recreateBlankWhenLost): its data is gone",
		"logicalVolume", lv.Name, "volume", vol.ID, "bytes", vol.SizeBytes)
	emit(r.Events, lv, "Warning", ReasonRecreatedBlank, "Recreate",
		"LV %s was lost from %s; recreated it blank (%d bytes) as its class asks (recreateBlankWhenLost): its data is gone, the workload must rebuild it",
		vol.ID, r.Node, vol.SizeBytes)
	return vol, nil
}

// publish keeps the LV active exactly while the spec publishes it here.
func (r *VolumeReconciler) publish(ctx context.Context, lv *v1alpha1.LogicalVolume, vol volume.Volume) (volume.Volume, error) {
	switch want := lv.Spec.PublishedNode; {
	case want == r.Node && !vol.Published:
		if _, err := r.Volumes.PublishVolume(ctx, vol.ID, r.Node); err != nil {
			return vol, err
		}
		vol.Published = true
	case want == "" && vol.Published:
		if err := r.Volumes.UnpublishVolume(ctx, vol.ID, r.Node); err != nil {
			return vol, err
		}
		vol.Published = false
	case want != "" && want != r.Node:
		return vol, fmt.Errorf("volume %s lives on %s and cannot be published to %s: %w", vol.ID, r.Node, want, volume.ErrNodeNotFound)
	}
	return vol, nil
}

// catchUp brings the LV to spec.catchUpTo when the status says it is not
// there yet (a move's catch-up, lvmvol.CatchUp), before any publish: the
// controller publishes a volume being moved nowhere, and one published
// here would be written under its workload, so that is refused. Done
// again after a crash that lost its status, it sends the delta again,
// which changes nothing.
func (r *VolumeReconciler) catchUp(ctx context.Context, lv *v1alpha1.LogicalVolume, vol volume.Volume) error {
	to := lv.Spec.CatchUpTo
	if to == "" || lv.Status.CaughtUpTo == to {
		return nil
	}
	if lv.Spec.PublishedNode != "" || vol.Published {
		return fmt.Errorf("%w: volume %s is published: it cannot catch up to %s under its workload", volume.ErrFailedPrecondition, vol.ID, to)
	}
	if lv.Spec.Source == nil || lv.Spec.Source.Kind != "snapshot" {
		return fmt.Errorf("%w: volume %s was not restored from a snapshot: it cannot catch up to %s", volume.ErrInvalidArgument, vol.ID, to)
	}
	base, err := volume.ParseID(lv.Spec.Source.ID)
	if err != nil {
		return fmt.Errorf("source of %s: %w", lv.Name, err)
	}
	snap, err := volume.ParseID(to)
	if err != nil {
		return fmt.Errorf("%w: catchUpTo of %s: %w", volume.ErrInvalidArgument, lv.Name, err)
	}
	return r.Volumes.CatchUp(ctx, vol.ID, base, snap)
}

// createRequest turns a spec into lvmvol's request.
func createRequest(s v1alpha1.LogicalVolumeSpec) (volume.CreateRequest, error) {
	req := volume.CreateRequest{
		Name: s.Name, VG: s.VolumeGroup, RequiredBytes: s.RequiredBytes, LimitBytes: s.LimitBytes,
		ParamsDigest: s.ParamsDigest, Encrypted: s.Encrypted, Limits: s.IOLimits.Volume(),
		Type: volume.Type{ThinPool: s.Type.ThinPool, Stripes: s.Type.Stripes,
			StripeSize: uint64(max(s.Type.StripeSize, 0)), Mirrors: s.Type.Mirrors, RAID: s.Type.RAID, Integrity: s.Type.Integrity},
	}
	if s.Source != nil {
		id, err := volume.ParseID(s.Source.ID)
		if err != nil {
			return req, fmt.Errorf("source of %s: %w", s.Name, err)
		}
		req.Source = &volume.ContentSource{Kind: s.Source.Kind, ID: id}
	}
	return req, nil
}

// report writes the outcome into the status; a failure is returned so that
// controller-runtime retries with backoff.
func (r *VolumeReconciler) report(ctx context.Context, lv *v1alpha1.LogicalVolume, vol volume.Volume, opErr error) error {
	if p := pendingOf(opErr); p != nil {
		return r.reportPending(ctx, lv, p)
	}
	st := &lv.Status
	before := *st.DeepCopy()
	st.ObservedGeneration = lv.Generation
	readyCondition(&st.Conditions, lv.Generation, opErr)
	if opErr != nil {
		st.Phase = v1alpha1.PhaseFailed
		if lv.Status.VolumeID != "" && !errors.Is(opErr, errVanished) {
			st.Phase = v1alpha1.PhaseReady // the LV exists; the last change failed
		}
		st.Error = &v1alpha1.OperationError{Code: volume.CodeOf(opErr).String(), Message: opErr.Error()}
	} else {
		st.Phase, st.Error = v1alpha1.PhaseReady, nil
		st.VolumeID, st.SizeBytes, st.Published = vol.ID.String(), vol.SizeBytes, vol.Published
		st.Mirrors = lv.Spec.Type.Mirrors // apply converted the LV where it differed
		st.IOLimits = lv.Spec.IOLimits    // and applied these
		st.WriteCache = lv.Spec.WriteCache.DeepCopy()
		st.CaughtUpTo = lv.Spec.CatchUpTo // apply caught up where it differed
		st.Encrypted = vol.Encrypted
		st.DevicePath = ""
		if vol.Published {
			st.DevicePath = vol.DevicePath
		}
		st.Health = keptHealth(st.Health, healthOf(vol.Health))
		if allocationChanged(before, *st) {
			spaceChanged(ctx, r.SpaceChanged, "carve or resize", lv.Name)
		}
	}
	if err := r.Client.Status().Update(ctx, lv); err != nil {
		return errors.Join(opErr, fmt.Errorf("update status of %s: %w", lv.Name, err))
	}
	r.events(lv, before, opErr)
	return opErr
}

// reportPending says in the status that data work runs: not Ready yet
// (a volume not carved yet is Pending), and no failure either (see
// reportPending in events.go).
func (r *VolumeReconciler) reportPending(ctx context.Context, lv *v1alpha1.LogicalVolume, p *volume.PendingError) error {
	st := &lv.Status
	if st.VolumeID == "" {
		st.Phase = v1alpha1.PhasePending
	}
	fields := outcomeFields{&st.Phase, &st.Error, &st.Conditions, &st.ObservedGeneration}
	return reportPending(ctx, r.Client, r.Events, lv, fields, p, "Reconcile")
}

// events tells what changed, once the status says so.
func (r *VolumeReconciler) events(lv *v1alpha1.LogicalVolume, before v1alpha1.LogicalVolumeStatus, opErr error) {
	st := lv.Status
	switch {
	case opErr != nil:
		failed(r.Events, lv, "Reconcile", opErr)
		return
	case before.VolumeID == "" && lv.Spec.Adopted:
		emit(r.Events, lv, "Normal", ReasonAdopted, "Adopt", "adopted LV %s (%d bytes) on %s for its static PersistentVolume", st.VolumeID, st.SizeBytes, r.Node)
	case before.VolumeID == "":
		emit(r.Events, lv, "Normal", ReasonCreated, "Create", "created LV %s (%d bytes) on %s", st.VolumeID, st.SizeBytes, r.Node)
	case st.SizeBytes > before.SizeBytes:
		emit(r.Events, lv, "Normal", ReasonExpanded, "Expand", "expanded LV %s from %d to %d bytes", st.VolumeID, before.SizeBytes, st.SizeBytes)
	case st.Mirrors != before.Mirrors:
		emit(r.Events, lv, "Normal", ReasonModified, "Modify", "LV %s has %d raid1 legs beyond the first, had %d", st.VolumeID, st.Mirrors, before.Mirrors)
	case st.IOLimits != before.IOLimits:
		emit(r.Events, lv, "Normal", ReasonModified, "Modify", "LV %s has IO limits %+v, had %+v", st.VolumeID, st.IOLimits, before.IOLimits)
	case !st.WriteCache.Same(before.WriteCache):
		emit(r.Events, lv, "Normal", ReasonModified, "Modify", "LV %s has a write cache of %d bytes (0: none)", st.VolumeID, st.WriteCache.Volume().Size)
	case st.CaughtUpTo != before.CaughtUpTo && st.CaughtUpTo != "":
		emit(r.Events, lv, "Normal", ReasonCaughtUp, "CatchUp", "LV %s caught up to snapshot %s", st.VolumeID, st.CaughtUpTo)
	}
	healthEvents(r.Events, lv, "LogicalVolume "+lv.Name, before.Health, st.Health)
	switch {
	case st.Published && !before.Published:
		emit(r.Events, lv, "Normal", ReasonPublished, "Publish", "activated LV %s on %s: %s", st.VolumeID, r.Node, st.DevicePath)
	case !st.Published && before.Published:
		emit(r.Events, lv, "Normal", ReasonUnpublished, "Unpublish", "deactivated LV %s on %s", st.VolumeID, r.Node)
	}
}

func healthOf(ps []volume.Problem) []v1alpha1.HealthProblem {
	var out []v1alpha1.HealthProblem
	for _, p := range ps {
		out = append(out, v1alpha1.HealthProblem{Kind: p.Kind.String(), Reason: p.Reason, Message: p.Message})
	}
	return out
}

// remove deletes the LV (wiped, as in standalone mode), then lets the
// resource go by dropping the finalizer, in that order.
// A wipe that runs on is reported (Wiping) and its ErrDataPending returned.
func (r *VolumeReconciler) remove(ctx context.Context, lv *v1alpha1.LogicalVolume) error {
	if !controllerutil.ContainsFinalizer(lv, v1alpha1.VolumeFinalizer) {
		return nil
	}
	// An adoption that never finished leaves the LV as it found it: the
	// LV was never this resource's (the controller drops such resources,
	// and an import's tags are either all there or not).
	if unadopted := lv.Spec.Adopted && lv.Status.VolumeID == ""; !unadopted {
		if err := r.Volumes.DeleteVolume(ctx, volumeID(lv)); err != nil {
			return r.report(ctx, lv, volume.Volume{}, err)
		}
		spaceChanged(ctx, r.SpaceChanged, "delete", lv.Name)
	}
	controllerutil.RemoveFinalizer(lv, v1alpha1.VolumeFinalizer)
	if err := r.Client.Update(ctx, lv); err != nil {
		return fmt.Errorf("remove finalizer of %s: %w", lv.Name, err)
	}
	emit(r.Events, lv, "Normal", ReasonDeleted, "Delete", "removed LV %s from %s", volumeID(lv), r.Node)
	return nil
}

// SetupWithManager watches LogicalVolumes (the reconciler skips other
// nodes' ones), a publish or unpublish ahead of the rest (publishFirst).
func (r *VolumeReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("logicalvolume").
		Watches(&v1alpha1.LogicalVolume{}, &publishFirst{}).
		WithOptions(r.controllerOptions()).Complete(r)
}

// controllerOptions configure the controller's workers.
func (r *VolumeReconciler) controllerOptions() controller.Options {
	return workers(r.Workers)
}

// workers runs n reconciles at once (0: DefaultWorkers); see the package
// comment for why that is safe.
func workers(n int) controller.Options {
	if n <= 0 {
		n = DefaultWorkers
	}
	return controller.Options{MaxConcurrentReconciles: n}
}
