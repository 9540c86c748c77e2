package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LogicalVolumeGroupSnapshotSpec is the group snapshot the controller
// wants: its sources' snapshots at one instant.
type LogicalVolumeGroupSnapshotSpec struct {
	// Name is the CSI group snapshot name.
	Name string `json:"name"`
	// NodeName is the node of the source volumes (they share it).
	NodeName string `json:"nodeName"`
	// SourceVolumeIDs are the CSI IDs of the source volumes (node/vg/lv),
	// in the order the CO gave them.
	// +kubebuilder:validation:MinItems=1
	SourceVolumeIDs []string `json:"sourceVolumeIDs"`
}

// GroupMember is one member snapshot of a group, as the agent reports it.
type GroupMember struct {
	// SnapshotID is the member's CSI snapshot ID (node/vg/lv).
	SnapshotID string `json:"snapshotID"`
	// SourceVolumeID is the CSI ID of the volume it holds.
	SourceVolumeID string `json:"sourceVolumeID"`
	// SizeBytes is the size a restore needs.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// ReadyToUse is false while a thick member's data is being copied.
	// +optional
	ReadyToUse bool `json:"readyToUse,omitempty"`
	// CreationTime is the group's instant.
	// +optional
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
}

// LogicalVolumeGroupSnapshotStatus is what the node agent reports.
type LogicalVolumeGroupSnapshotStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// GroupSnapshotID is the CSI group snapshot ID (node/vg/group-…).
	// +optional
	GroupSnapshotID string `json:"groupSnapshotID,omitempty"`
	// Members are the member snapshots, one per source volume.
	// +optional
	// +listType=atomic
	Members []GroupMember `json:"members,omitempty"`
	// ReadyToUse: every member is ready to use.
	// +optional
	ReadyToUse bool `json:"readyToUse,omitempty"`
	// CreationTime is the group's instant.
	// +optional
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// +optional
	Error *OperationError `json:"error,omitempty"`
	// ObservedGeneration is the generation this status is about (see
	// LogicalVolumeSnapshotStatus).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, as on LogicalVolume.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// LogicalVolumeGroupSnapshot is one Carve group snapshot: the snapshots of
// several volumes of one node, taken at one instant.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=clvgs
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Ready",type=boolean,JSONPath=`.status.readyToUse`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LogicalVolumeGroupSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LogicalVolumeGroupSnapshotSpec   `json:"spec"`
	Status LogicalVolumeGroupSnapshotStatus `json:"status,omitempty"`
}

// LogicalVolumeGroupSnapshotList lists LogicalVolumeGroupSnapshots.
// +kubebuilder:object:root=true
type LogicalVolumeGroupSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LogicalVolumeGroupSnapshot `json:"items"`
}
