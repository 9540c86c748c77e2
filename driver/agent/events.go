package agent

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// ConditionReady is the condition the agent keeps on its resources
// (v1alpha1.ConditionReady).
const ConditionReady = v1alpha1.ConditionReady

// Event types and reasons the agent emits on LogicalVolumes and
// LogicalVolumeSnapshots (kubectl describe shows them).
const (
	ReasonCreated     = "Created"
	ReasonExpanded    = "Expanded"
	ReasonPublished   = "Published"
	ReasonUnpublished = "Unpublished"
	ReasonDeleted     = "Deleted"
	ReasonFailed      = "Failed"
	// ReasonCopying and ReasonWiping: long data work runs in the
	// background (the Ready condition's reason meanwhile; a Normal event
	// when it starts).
	ReasonCopying = "Copying"
	ReasonWiping  = "Wiping"
	// ReasonSyncing: new raid1 legs are being synced (ModifyVolume);
	// ReasonModified: the LV took its new mutable parameters.
	ReasonSyncing  = "Syncing"
	ReasonModified = "Modified"
	// ReasonOrphaned (on the NodeStorage) and ReasonMissing (on the
	// LogicalVolume): the storage report's audit found an LV with no
	// resource, or a carved resource with no LV (StorageReporter.audit).
	ReasonOrphaned = "OrphanedVolume"
	ReasonMissing  = "VolumeMissing"
	// ReasonRecreatedBlank: a lost volume was carved again, blank, as
	// its class asks (recreateBlankWhenLost).
	ReasonRecreatedBlank = "RecreatedBlank"
	// ReasonAdopted: an existing LV was taken over for a resource made
	// for it (spec.adopted).
	ReasonAdopted = "Adopted"
	// ReasonCaughtUp: a volume took in what changed in its source since
	// its copy (spec.catchUpTo, a move's catch-up).
	ReasonCaughtUp = "CaughtUp"
)

// emit records an event when there is a recorder (tests may have none).
func emit(rec events.EventRecorder, obj runtime.Object, typ, reason, action, note string, args ...any) {
	emitAbout(rec, obj, nil, typ, reason, action, note, args...)
}

// emitAbout is emit with a related object. Events about one object that
// share type, reason and action are one series to the event recorder
// (events.k8s.io), whatever their notes: a second within minutes only
// counts up the first, and its note is lost. A related object keeps apart
// the events that tell of different things on the same object.
//
// An event about a resource made for a tenant's object (spec.requester: a
// claim, a VolumeSnapshot) goes on that object too, in its namespace, as
// about the resource: the tenant reads it with `kubectl describe`, and
// needs no right to the cluster-scoped resource.
func emitAbout(rec events.EventRecorder, obj, related runtime.Object, typ, reason, action, note string, args ...any) {
	if rec == nil {
		return
	}
	rec.Eventf(obj, related, typ, reason, action, note, args...)
	if ref := requesterRef(obj); ref != nil {
		if related == nil {
			related = obj
		}
		rec.Eventf(ref, related, typ, reason, action, note, args...)
	}
}

// requesterRef is the object a resource was made for (spec.requester),
// nil for none, and nil once the resource is being deleted: the object
// is then gone or going (its deletion is what deletes the resource), and
// its namespace would only collect events about nothing.
func requesterRef(obj runtime.Object) *corev1.ObjectReference {
	var r *v1alpha1.Requester
	switch o := obj.(type) {
	case *v1alpha1.LogicalVolume:
		r = o.Spec.Requester
	case *v1alpha1.LogicalVolumeSnapshot:
		r = o.Spec.Requester
	}
	if o, ok := obj.(metav1.Object); !ok || r == nil || o.GetDeletionTimestamp() != nil {
		return nil
	}
	return &corev1.ObjectReference{APIVersion: r.APIVersion, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name,
		UID: types.UID(r.UID)}
}

// progress tells the tenant how far data work has got, at each step of
// pendingMessage, on the object the resource was made for (operators have
// the resource's Ready condition). Each step is an event of its own: the
// action names the step, since events that share type, reason and action
// are one series whose first note is the only one kept.
func progress(rec events.EventRecorder, obj runtime.Object, p *volume.PendingError, action string) {
	ref := requesterRef(obj)
	if rec == nil || ref == nil {
		return
	}
	rec.Eventf(ref, obj, "Normal", pendingReason(p), fmt.Sprintf("%s %d%%", action, p.Percent()/10*10), "%s", pendingMessage(p))
}

// readyCondition sets the Ready condition from an operation's outcome.
func readyCondition(conds *[]metav1.Condition, generation int64, opErr error) {
	c := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Reconciled",
		ObservedGeneration: generation}
	if opErr != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, volume.CodeOf(opErr).String(), opErr.Error()
	}
	meta.SetStatusCondition(conds, c)
}

// outcomeFields points at what a snapshot's or a group's status says of the
// last operation.
type outcomeFields struct {
	phase      *v1alpha1.Phase
	err        **v1alpha1.OperationError
	conditions *[]metav1.Condition
	observed   *int64
}

// set records an operation's outcome about generation: Ready, the phase
// and the error (nil on success).
func (o outcomeFields) set(generation int64, opErr error) {
	*o.observed = generation
	readyCondition(o.conditions, generation, opErr)
	if opErr != nil {
		*o.phase = v1alpha1.PhaseFailed
		*o.err = &v1alpha1.OperationError{Code: volume.CodeOf(opErr).String(), Message: opErr.Error()}
		return
	}
	*o.phase, *o.err = v1alpha1.PhaseReady, nil
}

// reportPending says in obj's status (fields) that data work runs, with no
// Error: the controller keeps waiting. It returns the pending error once
// the status says so; the event goes out when the work is first seen.
func reportPending(ctx context.Context, c client.Client, rec events.EventRecorder, obj client.Object,
	fields outcomeFields, p *volume.PendingError, action string) error {
	*fields.err, *fields.observed = nil, obj.GetGeneration()
	started, stepped := pendingCondition(fields.conditions, obj.GetGeneration(), p)
	if err := c.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("update status of %s: %w", obj.GetName(), err)
	}
	switch {
	case started:
		emit(rec, obj, "Normal", pendingReason(p), action, "%s", pendingMessage(p))
	case stepped:
		progress(rec, obj, p, action)
	}
	return p
}

// pendingOf returns the data work err says runs, or nil.
func pendingOf(err error) *volume.PendingError {
	var p *volume.PendingError
	if errors.As(err, &p) {
		return p
	}
	return nil
}

func pendingReason(p *volume.PendingError) string {
	switch p.Work {
	case "wipe":
		return ReasonWiping
	case volume.WorkSync:
		return ReasonSyncing
	}
	return ReasonCopying
}

// pendingMessage says how far the work has got, in steps of 10%: each
// change of the message is a status write, which triggers a reconcile of
// its own, so a finer one would make the agent busy-poll a fast copy.
func pendingMessage(p *volume.PendingError) string {
	return fmt.Sprintf("%s of %s runs in the background: %d%% done", p.Work, p.LV, p.Percent()/10*10)
}

// pendingCondition sets Ready False for data work that runs and tells
// whether the reason changed (the work started, or changed kind) and, if
// not, whether the message did (the work got a step further).
func pendingCondition(conds *[]metav1.Condition, generation int64, p *volume.PendingError) (started, stepped bool) {
	reason, msg := pendingReason(p), pendingMessage(p)
	old := meta.FindStatusCondition(*conds, ConditionReady)
	started = old == nil || old.Reason != reason
	stepped = !started && old.Message != msg
	meta.SetStatusCondition(conds, metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse,
		Reason: reason, Message: msg, ObservedGeneration: generation})
	return started, stepped
}

// failed emits the Warning event of a failed operation.
func failed(rec events.EventRecorder, obj runtime.Object, action string, err error) {
	emit(rec, obj, "Warning", ReasonFailed, action, "%s", fmt.Sprintf("%s: %v", volume.CodeOf(err), err))
}
