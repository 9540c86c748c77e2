package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LogicalVolumeSnapshotSpec is the snapshot the controller wants.
type LogicalVolumeSnapshotSpec struct {
	// Name is the CSI snapshot name.
	Name string `json:"name"`
	// NodeName is the node of the source volume.
	NodeName string `json:"nodeName"`
	// SourceVolumeID is the CSI ID of the source volume (node/vg/lv).
	SourceVolumeID string `json:"sourceVolumeID"`
	// Requester is the VolumeSnapshot the snapshot was taken for, when
	// the CO named it; its tenant gets the agent's events too.
	// +optional
	Requester *Requester `json:"requester,omitempty"`
}

// LogicalVolumeSnapshotStatus is what the node agent reports.
type LogicalVolumeSnapshotStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// SnapshotID is the CSI snapshot ID (node/vg/lv).
	// +optional
	SnapshotID string `json:"snapshotID,omitempty"`
	// SizeBytes is the size a restore needs.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// ReadyToUse is false while a thick snapshot's data is being copied.
	// +optional
	ReadyToUse bool `json:"readyToUse,omitempty"`
	// CreationTime is when the snapshot point was taken.
	// +optional
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// Encrypted tells whether the snapshot holds encrypted data (its
	// volume's LUKS2 header and ciphertext), so that a restore on another
	// node is encrypted as it is, even once its volume is gone. Unset in
	// what an agent older than this field reported.
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
	// +optional
	Error *OperationError `json:"error,omitempty"`
	// ObservedGeneration is the generation this status is about: the
	// spec never changes, but the deletion raises the generation, so an
	// error about the deletion is told from one about the creation.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, as on LogicalVolume.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// LogicalVolumeSnapshot is one Carve snapshot on the node of its source.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=clvs
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.sourceVolumeID`
// +kubebuilder:printcolumn:name="Ready",type=boolean,JSONPath=`.status.readyToUse`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LogicalVolumeSnapshot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LogicalVolumeSnapshotSpec   `json:"spec"`
	Status LogicalVolumeSnapshotStatus `json:"status,omitempty"`
}

// LogicalVolumeSnapshotList lists LogicalVolumeSnapshots.
// +kubebuilder:object:root=true
type LogicalVolumeSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LogicalVolumeSnapshot `json:"items"`
}
