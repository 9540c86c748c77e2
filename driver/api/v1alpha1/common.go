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
