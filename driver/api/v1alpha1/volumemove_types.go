package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VolumeMoveSpec is the move a tenant asks for: their claim's data put on
// another node, the workload down only for a catch-up (docs/moves.md).
// It is fixed once made: a move to elsewhere is another VolumeMove.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a VolumeMove's spec is fixed once made"
type VolumeMoveSpec struct {
	// Claim is a bound PersistentVolumeClaim of a Carve class in the
	// VolumeMove's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Claim string `json:"claim"`
	// ToNode is the node the claim's data moves to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ToNode string `json:"toNode"`
}

// MovePhase is the step a move is at. Each is recorded before the work
// of the next begins, so that a restarted controller goes on from it.
// +kubebuilder:validation:Enum=Copy;ReadyToCutOver;CutOver;CatchUp;Swap;Moved;Failed
type MovePhase string

const (
	// MoveCopy: a first snapshot (S1) of the claim's volume is copied
	// into a new volume on toNode while the workload runs.
	MoveCopy MovePhase = "Copy"
	// MoveReadyToCutOver: the copy is in; the user stops the workload.
	// From here on the volume is held: a ControllerPublish of it is
	// refused (FAILED_PRECONDITION).
	MoveReadyToCutOver MovePhase = "ReadyToCutOver"
	// MoveCutOver: the volume is published nowhere; a second snapshot
	// (S2) is taken.
	MoveCutOver MovePhase = "CutOver"
	// MoveCatchUp: the new volume takes in what changed between S1 and
	// S2 (LogicalVolume spec.catchUpTo).
	MoveCatchUp MovePhase = "CatchUp"
	// MoveSwap: the claim is made again under its name, bound to a new
	// PersistentVolume of the new volume; the old ones go.
	MoveSwap MovePhase = "Swap"
	// MoveMoved: done.
	MoveMoved MovePhase = "Moved"
	// MoveFailed: the move cannot go on (status.message says why); what
	// it made is removed and the claim is as it was.
	MoveFailed MovePhase = "Failed"
)

// VolumeMoveStatus is what the controller has done, step by step.
type VolumeMoveStatus struct {
	// +optional
	Phase MovePhase `json:"phase,omitempty"`
	// FromNode is the node the claim's volume was on.
	// +optional
	FromNode string `json:"fromNode,omitempty"`
	// SourceVolumeID is the CSI ID of the claim's volume before the move.
	// +optional
	SourceVolumeID string `json:"sourceVolumeID,omitempty"`
	// FirstSnapshotID is S1, the snapshot the copy is made from.
	// +optional
	FirstSnapshotID string `json:"firstSnapshotID,omitempty"`
	// TargetVolumeID is the CSI ID of the new volume on toNode.
	// +optional
	TargetVolumeID string `json:"targetVolumeID,omitempty"`
	// SecondSnapshotID is S2, taken once the workload stopped.
	// +optional
	SecondSnapshotID string `json:"secondSnapshotID,omitempty"`
	// PersistentVolume is the new PersistentVolume the claim is bound to.
	// +optional
	PersistentVolume string `json:"persistentVolume,omitempty"`
	// CopiedPercent is how far the copy has got.
	// +optional
	CopiedPercent int32 `json:"copiedPercent,omitempty"`
	// CutOverTime is when the workload was found stopped; the downtime
	// runs from it to MovedTime.
	// +optional
	CutOverTime *metav1.Time `json:"cutOverTime,omitempty"`
	// MovedTime is when the claim was bound again on toNode.
	// +optional
	MovedTime *metav1.Time `json:"movedTime,omitempty"`
	// Message says what the move waits for, or why it failed.
	// +optional
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the generation this status is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VolumeMove asks for a claim's data to be moved to another node.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=vmove
// +kubebuilder:printcolumn:name="Claim",type=string,JSONPath=`.spec.claim`
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.status.fromNode`
// +kubebuilder:printcolumn:name="To",type=string,JSONPath=`.spec.toNode`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VolumeMove struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VolumeMoveSpec   `json:"spec"`
	Status VolumeMoveStatus `json:"status,omitempty"`
}

// VolumeMoveList lists VolumeMoves.
// +kubebuilder:object:root=true
type VolumeMoveList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VolumeMove `json:"items"`
}
