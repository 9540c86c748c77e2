package agent

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"carve.dev/carve/driver"
)

// ConditionReady is the condition the agent keeps on its resources: True
// when the last reconcile succeeded; False with the failure's CSI code as
// the reason (e.g. ResourceExhausted) and its message otherwise.
const ConditionReady = "Ready"

// Event types and reasons the agent emits on LogicalVolumes and
// LogicalVolumeSnapshots (kubectl describe shows them).
const (
	ReasonCreated     = "Created"
	ReasonExpanded    = "Expanded"
	ReasonPublished   = "Published"
	ReasonUnpublished = "Unpublished"
	ReasonDeleted     = "Deleted"
	ReasonFailed      = "Failed"
)

// emit records an event when there is a recorder (tests may have none).
func emit(rec events.EventRecorder, obj runtime.Object, typ, reason, action, note string, args ...any) {
	if rec != nil {
		rec.Eventf(obj, nil, typ, reason, action, note, args...)
	}
}

// readyCondition sets the Ready condition from an operation's outcome.
func readyCondition(conds *[]metav1.Condition, generation int64, opErr error) {
	c := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Reconciled",
		ObservedGeneration: generation}
	if opErr != nil {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, driver.CodeOf(opErr).String(), opErr.Error()
	}
	meta.SetStatusCondition(conds, c)
}

// failed emits the Warning event of a failed operation.
func failed(rec events.EventRecorder, obj runtime.Object, action string, err error) {
	emit(rec, obj, "Warning", ReasonFailed, action, "%s", fmt.Sprintf("%s: %v", driver.CodeOf(err), err))
}
