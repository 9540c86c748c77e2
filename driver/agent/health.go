package agent

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/volume"
)

// actionHealth is the action of the events that tell a health problem
// appeared (Warning) or cleared (Normal); their reason is the problem's.
const actionHealth = "HealthCheck"

func problemKey(p v1alpha1.HealthProblem) string { return p.Kind + "/" + p.Reason }

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

// healthEvents logs and records what changed from before to after, once
// the status says so: a Warning for each new problem (its reason, its
// message), a Normal one with the same reason for each that cleared. what
// names the sick thing in the log.
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
	ref, err := reference.GetReference(s.Client.Scheme(), ns)
	if err != nil {
		return ns
	}
	ref.FieldPath = fmt.Sprintf("status.volumeGroups{%s}", vg)
	return ref
}
