package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/lvm"
)

// actionHealth is the action of the events that tell a health problem
// appeared (Warning) or cleared (Normal); their reason is the problem's.
const actionHealth = "HealthCheck"

// sameProblems tells whether two health lists name the same problems
// (kinds and reasons, in order), whatever their messages say: those carry
// figures (a pool 91.3% full, raid legs 40% in sync) that move by the
// minute, and a LogicalVolume status write for each would wake a reconcile
// for each (see pendingMessage). So a LogicalVolume's messages are as of
// when its problems appeared; NodeGetVolumeHealth tells them now.
func sameProblems(a, b []v1alpha1.HealthProblem) bool {
	return slices.EqualFunc(a, b, func(x, y v1alpha1.HealthProblem) bool { return problemKey(x) == problemKey(y) })
}

func problemKey(p v1alpha1.HealthProblem) string { return p.Kind + "/" + p.Reason }

// keptHealth is now, or was when it names the same problems (sameProblems).
func keptHealth(was, now []v1alpha1.HealthProblem) []v1alpha1.HealthProblem {
	if sameProblems(was, now) {
		return was
	}
	return now
}

// newProblems are the problems of after whose kind and reason before
// lacks, each once.
func newProblems(before, after []v1alpha1.HealthProblem) []v1alpha1.HealthProblem {
	seen := map[string]bool{}
	for _, p := range before {
		seen[problemKey(p)] = true
	}
	var out []v1alpha1.HealthProblem
	for _, p := range after {
		if !seen[problemKey(p)] {
			seen[problemKey(p)] = true
			out = append(out, p)
		}
	}
	return out
}

// healthEvents logs and records what changed from before to after: a
// Warning for each new problem (its reason, its message), a Normal one
// with the same reason for each that cleared. what names the sick thing
// in the log.
func healthEvents(rec events.EventRecorder, regarding runtime.Object, what string, before, after []v1alpha1.HealthProblem) {
	for _, p := range newProblems(before, after) {
		klog.InfoS("Health problem", "of", what, "kind", p.Kind, "reason", p.Reason, "message", p.Message)
		emit(rec, regarding, "Warning", p.Reason, actionHealth, "%s", p.Message)
	}
	for _, p := range newProblems(after, before) {
		klog.InfoS("Health problem cleared", "of", what, "reason", p.Reason)
		emit(rec, regarding, "Normal", p.Reason, actionHealth, "cleared (was: %s)", p.Message)
	}
}

// announceVGHealth tells of the VG problems that appeared or cleared since
// the last written status (like announce, once each, not every 30 s).
func (s *StorageReporter) announceVGHealth(ns *v1alpha1.NodeStorage, space []volume.VGSpace) {
	was := map[string][]v1alpha1.HealthProblem{}
	for _, vg := range ns.Status.VolumeGroups {
		was[vg.Name] = vg.Health
	}
	for _, vg := range space {
		healthEvents(s.Events, s.vgReference(ns, vg.Name), "volume group "+vg.Name+" of "+s.Node, was[vg.Name], healthOf(vg.Health))
	}
}

// vgReference regards VG vg's entry in ns's status (a field path, as
// kubelet's events regard a pod's container): events about one object
// with the same type, reason and action are one series to the recorder,
// which keeps the first note only (see emitAbout), so two VGs losing a PV
// must regard different things. ns itself when no reference can be made.
func (s *StorageReporter) vgReference(ns *v1alpha1.NodeStorage, vg string) runtime.Object {
	return s.statusReference(ns, fmt.Sprintf("status.volumeGroups{%s}", vg))
}

// statusReference regards the entry of ns's status at fieldPath; ns
// itself when no reference can be made.
func (s *StorageReporter) statusReference(ns *v1alpha1.NodeStorage, fieldPath string) runtime.Object {
	ref, err := reference.GetReference(s.Client.Scheme(), ns)
	if err != nil {
		return ns
	}
	ref.FieldPath = fieldPath
	return ref
}

// syncHealth brings the health in each carved LogicalVolume's status up to
// its volume's, as the audit's listing tells it (lvmvol gives each volume
// its own and its thin pool's problems): the VolumeReconciler sets it only
// when it reconciles, and a thin pool filling up after that would leave
// the volume healthy there for good. A difference seen in cached reads is
// confirmed on a fresh listing first, so that a report older than the
// status (a reconcile reads afresh) never undoes it; that listing becomes
// the cached one, so the next report sees no difference again. At idle
// nothing differs, and nothing is read afresh or written.
//
// The status is written here rather than by a reconcile enqueued for it:
// the report holds the volume's health and its resource already, while a
// reconcile would need a way into the VolumeReconciler's queue and would
// rerun the create, publish and modify steps on fresh lvm2 reads to learn
// the same. The write wakes a reconcile anyway (a watch event), which
// finds the same problems and keeps them (keptHealth).
func (s *StorageReporter) syncHealth(ctx context.Context, read reading) error {
	stale := staleHealth(read)
	if len(stale) > 0 && !read.fresh {
		vols, err := s.Volumes(ctx, lvm.Fresh)
		if err != nil {
			return fmt.Errorf("confirm volume health: list volumes afresh: %w", err)
		}
		read.vols = vols
		stale = staleHealth(read)
	}
	var errs []error
	for _, c := range stale {
		errs = append(errs, s.writeHealth(ctx, c.lv, c.health))
	}
	return errors.Join(errs...)
}

// healthChange is a LogicalVolume whose status names other problems than
// its volume has, and those.
type healthChange struct {
	lv     *v1alpha1.LogicalVolume
	health []v1alpha1.HealthProblem
}

// staleHealth finds the carved LogicalVolumes, not being deleted, whose
// status's health is not their volume's.
func staleHealth(read reading) []healthChange {
	var out []healthChange
	for _, v := range read.vols {
		lv := read.claimed[v.ID.VG+"/"+v.ID.LV]
		if lv == nil || lv.Status.VolumeID == "" || !lv.DeletionTimestamp.IsZero() {
			continue
		}
		if now := healthOf(v.Health); !sameProblems(lv.Status.Health, now) {
			out = append(out, healthChange{lv: lv, health: now})
		}
	}
	return out
}

// writeHealth writes a LogicalVolume's health (the node policy lets the
// agent update its own node's, which these are). The update carries the
// resourceVersion the cache listed: if a reconcile wrote the status since,
// it conflicts and changes nothing, and the next report looks again.
func (s *StorageReporter) writeHealth(ctx context.Context, lv *v1alpha1.LogicalVolume, health []v1alpha1.HealthProblem) error {
	lv = lv.DeepCopy()
	before := lv.Status.Health
	lv.Status.Health = health
	err := s.Client.Status().Update(ctx, lv)
	if apierrors.IsConflict(err) {
		klog.V(2).InfoS("LogicalVolume changed since it was listed; the next report looks at its health again", "logicalVolume", lv.Name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("update the health of LogicalVolume %s: %w", lv.Name, err)
	}
	healthEvents(s.Events, lv, "LogicalVolume "+lv.Name, before, health)
	return nil
}
