// Package move is the controller of VolumeMoves (docs/moves.md): it puts
// a claim's data on another node with the workload down only for a
// catch-up, walking the move's phases and recording each in its status,
// so that a restarted controller goes on from the last one:
//
//	Copy            S1 of the claim's volume, restored on toNode (the target)
//	ReadyToCutOver  the hold on the volume; waits for it to be published nowhere
//	CutOver         S2, and publishedNode looked at again
//	CatchUp         the target's spec.catchUpTo = S2, until its status says so
//	Swap            a new PersistentVolume, the claim made again bound to it,
//	                the old PersistentVolume, volume, S1 and S2 gone
//	Moved / Failed  done; a failed move leaves nothing of its own
//
// Everything a move makes is named after its UID (names.go), so a
// restarted controller finds it whether or not its status said so.
// Volume work goes through the controller's backend, as the CO's does.
package move

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/backend"
)

// Event reasons, on the VolumeMove and on its claim (where the tenant
// reads them).
const (
	ReasonMoving         = "Moving"
	ReasonReadyToCutOver = "ReadyToCutOver"
	ReasonMoved          = "Moved"
	ReasonMoveFailed     = "MoveFailed"
)

// Finalizer keeps a VolumeMove deleted mid-way until what it made is
// removed (its hold above all, which would keep the claim's pods from
// starting) or, once the claim is being swapped, until the swap is done.
const Finalizer = "lvm.carve.dev/volumemove"

// poll is how soon a move that waits (for an agent, or for the user to
// stop the workload) looks again, should no watch event come first.
const poll = 5 * time.Second

// callTime is how long one reconcile waits in a backend call for an
// agent: the backend's calls wait until the work is done, a move's steps
// look again instead.
const callTime = 2 * time.Second

// VolumeCreator is the CSI controller's CreateVolume (csi.Controller):
// the target is created as the provisioner would create a restore, from
// the class's parameters.
type VolumeCreator interface {
	CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error)
}

// Reconciler walks VolumeMoves; it runs in carve controller with
// leadership. Its request is a VolumeMove's namespace and name.
type Reconciler struct {
	// Client reads VolumeMoves (the manager's cache) and writes to the API.
	Client client.Client
	// API reads everything else uncached: a step acts on what is there
	// now (the claim it deleted a moment ago, publishedNode).
	API client.Reader
	// Backend takes and deletes the snapshots and deletes the old volume.
	Backend *backend.Backend
	// Volumes creates the target (csi.NewController over Backend).
	Volumes VolumeCreator
	// Events records what happens; nil records nothing.
	Events events.EventRecorder
}

// step is one phase's work on m: it does what the phase asks (or first
// records in m.Status what it is about to make) and leaves in m.Status
// where the move got to. wait > 0: look again after it.
type step func(ctx context.Context, m *v1alpha1.VolumeMove) (wait time.Duration, err error)

// refusal is a move that cannot be done: it fails, with msg.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

func refuse(format string, args ...any) error { return &refusal{fmt.Sprintf(format, args...)} }

// Reconcile walks one move as far as it can go now.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var m v1alpha1.VolumeMove
	if err := r.Client.Get(ctx, req.NamespacedName, &m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !m.DeletionTimestamp.IsZero() {
		return r.deleted(ctx, &m)
	}
	if controllerutil.AddFinalizer(&m, Finalizer) {
		if err := r.Client.Update(ctx, &m); err != nil {
			return ctrl.Result{}, fmt.Errorf("add the finalizer of VolumeMove %s: %w", key(&m), err)
		}
	}
	return r.walk(ctx, &m)
}

// walk runs the step of m's phase and saves the status it leaves.
func (r *Reconciler) walk(ctx context.Context, m *v1alpha1.VolumeMove) (ctrl.Result, error) {
	before := m.Status.DeepCopy()
	wait, err := r.stepOf(m.Status.Phase)(ctx, m)
	if no, ok := errors.AsType[*refusal](err); ok {
		r.fail(ctx, m, no.msg)
		wait, err = 0, nil
	}
	if !equality.Semantic.DeepEqual(before, &m.Status) {
		m.Status.ObservedGeneration = m.Generation
		if serr := r.Client.Status().Update(ctx, m); serr != nil {
			return ctrl.Result{}, errors.Join(err, fmt.Errorf("status of VolumeMove %s: %w", key(m), serr))
		}
	}
	return ctrl.Result{RequeueAfter: wait}, err
}

func (r *Reconciler) stepOf(p v1alpha1.MovePhase) step {
	switch p {
	case "", v1alpha1.MoveCopy:
		return r.copy
	case v1alpha1.MoveReadyToCutOver:
		return r.readyToCutOver
	case v1alpha1.MoveCutOver:
		return r.cutOver
	case v1alpha1.MoveCatchUp:
		return r.catchUp
	case v1alpha1.MoveSwap:
		return r.swap
	case v1alpha1.MoveFailed:
		return r.undo
	}
	return func(context.Context, *v1alpha1.VolumeMove) (time.Duration, error) { return 0, nil } // Moved
}

// fail records the refusal; undo (the Failed step) removes what the move
// made.
func (r *Reconciler) fail(ctx context.Context, m *v1alpha1.VolumeMove, msg string) {
	klog.InfoS("A volume move failed", "volumeMove", key(m), "reason", msg)
	m.Status.Phase, m.Status.Message = v1alpha1.MoveFailed, msg
	r.emit(ctx, m, corev1.EventTypeWarning, ReasonMoveFailed, "the move of claim %s to node %s failed: %s; what it made is removed, the claim stays as it was",
		m.Spec.Claim, m.Spec.ToNode, msg)
}

// deleted: a move deleted before it is done is undone, except once the
// claim is being swapped, which only going on finishes; then the
// finalizer goes.
func (r *Reconciler) deleted(ctx context.Context, m *v1alpha1.VolumeMove) (ctrl.Result, error) {
	switch m.Status.Phase {
	case v1alpha1.MoveSwap:
		return r.walk(ctx, m)
	case v1alpha1.MoveMoved:
	default:
		if wait, err := r.undo(ctx, m); err != nil || wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, err
		}
	}
	if controllerutil.RemoveFinalizer(m, Finalizer) {
		if err := r.Client.Update(ctx, m); err != nil {
			return ctrl.Result{}, fmt.Errorf("remove the finalizer of VolumeMove %s: %w", key(m), client.IgnoreNotFound(err))
		}
	}
	return ctrl.Result{}, nil
}

// emit records an event on the move and on its claim (as the claim is
// now: during the swap, the one made again).
func (r *Reconciler) emit(ctx context.Context, m *v1alpha1.VolumeMove, typ, reason, note string, args ...any) {
	if r.Events == nil {
		return
	}
	r.Events.Eventf(m, nil, typ, reason, "Move", note, args...)
	var claim corev1.PersistentVolumeClaim
	if err := r.API.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.Claim}, &claim); err == nil {
		r.Events.Eventf(&claim, m, typ, reason, "Move", note, args...)
	}
}
