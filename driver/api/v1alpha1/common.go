package v1alpha1

// Phase is where a resource's LV stands.
// +kubebuilder:validation:Enum=Pending;Ready;Failed
type Phase string

const (
	// PhasePending: the node agent has not carved it yet.
	PhasePending Phase = "Pending"
	// PhaseReady: the LV exists as the spec asks.
	PhaseReady Phase = "Ready"
	// PhaseFailed: the last attempt failed; Error says why, and the agent
	// keeps retrying.
	PhaseFailed Phase = "Failed"
)

// ConditionReady is the condition the node agent keeps on each resource:
// True when its last reconcile succeeded; False with the failure's CSI
// code as the reason (e.g. ResourceExhausted) and its message, or while
// data work runs, with the work (Copying, Wiping, Syncing) as the reason
// and how far it has got as the message.
const ConditionReady = "Ready"

// OperationError is the last failure of the node agent, with a code the
// controller maps back to a CSI error code.
type OperationError struct {
	// Code is the name of the gRPC code the failure maps to
	// (volume.CodeOf), e.g. ResourceExhausted, NotFound,
	// FailedPrecondition, InvalidArgument, OutOfRange, AlreadyExists,
	// Internal: the controller answers the CO with that code.
	Code string `json:"code"`
	// Message says what happened, for people.
	Message string `json:"message"`
}

// HealthProblem is one adverse condition of a volume (CSI VolumeHealth).
type HealthProblem struct {
	// Kind is Degraded, Inaccessible or DataLoss.
	Kind string `json:"kind"`
	// Reason is CamelCase, for machines.
	Reason string `json:"reason"`
	// Message is for people.
	// +optional
	Message string `json:"message,omitempty"`
}

// Requester is the Kubernetes object a resource was made for: the
// PersistentVolumeClaim of a volume, the VolumeSnapshot of a snapshot
// (from the CSI call's parameters, csi-provisioner's and csi-snapshotter's
// --extra-create-metadata). The node agent posts its events on it too, in
// its namespace, where the tenant who made it can read them. Fixed at
// creation; the UID keeps a later object of the same name apart.
type Requester struct {
	// APIVersion of the object: v1, snapshot.storage.k8s.io/v1.
	APIVersion string `json:"apiVersion"`
	// Kind: PersistentVolumeClaim or VolumeSnapshot.
	// +kubebuilder:validation:Enum=PersistentVolumeClaim;VolumeSnapshot
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// Annotations the controller writes on the resources of a clone placed
// on another node than its source (driver/backend/remote.go): the clone
// goes through a snapshot of the source, restored on the clone's node.
const (
	// AnnotationClonedFrom, on the clone's LogicalVolume: the CSI ID of
	// the volume it was asked to clone (its spec.source is the snapshot).
	AnnotationClonedFrom = "lvm.carve.dev/cloned-from"
	// AnnotationCloneFor, on that snapshot's LogicalVolumeSnapshot: the
	// LogicalVolume it was taken for. The controller deletes it once the
	// clone's copy is in, and lists it to no CO.
	AnnotationCloneFor = "lvm.carve.dev/clone-for"
	// AnnotationMoveFor, on a snapshot a move takes (its S1 and S2,
	// driver/move): the VolumeMove (namespace/name) it was taken for. The
	// move controller deletes it when the move ends, and no CO lists it.
	AnnotationMoveFor = "lvm.carve.dev/move-for"
)

// AnnotationMovedBy, on a LogicalVolume, names the VolumeMove
// (namespace/name) that holds the volume: from ReadyToCutOver on, a
// ControllerPublish of it is refused (FAILED_PRECONDITION), so that no
// pod writes it after the second snapshot of its move is taken. The move
// controller writes it before it looks whether the volume is still
// published, and removes it when the move fails.
const AnnotationMovedBy = "lvm.carve.dev/moved-by"
