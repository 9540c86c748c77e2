package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LogicalVolumeSpec is the volume the controller wants on a node.
type LogicalVolumeSpec struct {
	// Name is the CSI volume name.
	Name string `json:"name"`
	// NodeName is the node whose volume group holds the LV.
	NodeName string `json:"nodeName"`
	// VolumeGroup is the VG on that node.
	VolumeGroup string `json:"volumeGroup"`
	// RequiredBytes is the least size; the LV grows when it rises.
	// +kubebuilder:validation:Minimum=1
	RequiredBytes int64 `json:"requiredBytes"`
	// LimitBytes is the most size at creation (0: none).
	// +optional
	LimitBytes int64 `json:"limitBytes,omitempty"`
	// Type of LV; empty for thick linear.
	// +optional
	Type VolumeType `json:"type,omitempty"`
	// Source gives the new volume its data.
	// +optional
	Source *ContentSource `json:"source,omitempty"`
	// ParamsDigest identifies the creation parameters (CSI idempotency).
	ParamsDigest string `json:"paramsDigest"`
	// Encrypted asks for encryption at rest (LUKS2, opened on the node
	// with the node-stage secret's key). A volume made from an encrypted
	// source is encrypted whatever this says (status.encrypted).
	// +optional
	Encrypted bool `json:"encrypted,omitempty"`
	// PublishedNode is set while the volume is published (attached) to that
	// node: the agent then keeps the LV active, and inactive otherwise.
	// +optional
	PublishedNode string `json:"publishedNode,omitempty"`
	// IOLimits cap the IO of the pods using the volume. They are mutable
	// (ControllerModifyVolume): the agent records them on the LV and puts
	// them on the pods of its node that have the volume published, and
	// status.ioLimits follows once that is done.
	// +optional
	IOLimits IOLimits `json:"ioLimits,omitempty"`
	// WriteCache is a dm-writecache in front of the LV (thick volumes
	// only), none when absent. It is mutable (ControllerModifyVolume): the
	// agent attaches, replaces or detaches it, and status.writeCache
	// follows once that is done.
	// +optional
	WriteCache *WriteCache `json:"writeCache,omitempty"`
	// RecreateBlankWhenLost: when the LV is lost (gone from its VG, which
	// lvm2 reads whole, after it was carved), the node agent recreates it
	// blank in place, with an event saying so; otherwise it reports the
	// loss and leaves the volume failed. Fixed at creation
	// (StorageClass parameter recreateBlankWhenLost).
	// +optional
	RecreateBlankWhenLost bool `json:"recreateBlankWhenLost,omitempty"`
	// Adopted: the resource was made for an LV that exists and that no
	// resource recorded (a static PersistentVolume naming it, after a
	// cluster rebuild or for an LV tagged carve.dev/import): the agent
	// takes the LV over as it is and never creates one.
	// +optional
	Adopted bool `json:"adopted,omitempty"`
	// Requester is the claim the volume was made for, when the CO named
	// it; its tenant gets the agent's events too.
	// +optional
	Requester *Requester `json:"requester,omitempty"`
	// CatchUpTo names a later snapshot of the volume that spec.source is
	// a snapshot of, on the source's node (a move's second snapshot,
	// docs/moves.md): the agent brings the LV from the source's bytes to
	// this snapshot's, receiving only what changed, and status.caughtUpTo
	// follows once that is done. The controller sets it on a ready volume
	// restored from another node's snapshot and published nowhere; the
	// source's node serves the catch-up only for a volume that names it
	// here.
	// +optional
	CatchUpTo string `json:"catchUpTo,omitempty"`
}

// IOLimits are per-second caps on a pod's IO on the volume's device; 0 or
// absent is no limit.
type IOLimits struct {
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadBytesPerSecond int64 `json:"readBytesPerSecond,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	WriteBytesPerSecond int64 `json:"writeBytesPerSecond,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReadIOPS int64 `json:"readIOPS,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	WriteIOPS int64 `json:"writeIOPS,omitempty"`
}

// VolumeType selects the kind of LV: at most one field is set.
type VolumeType struct {
	// ThinPool names a thin pool of the VG.
	// +optional
	ThinPool string `json:"thinPool,omitempty"`
	// Stripes > 1 stripes the LV over that many PVs.
	// +optional
	Stripes int `json:"stripes,omitempty"`
	// StripeSize is bytes per stripe.
	// +optional
	StripeSize int64 `json:"stripeSize,omitempty"`
	// Mirrors > 0 makes a raid1 LV of Mirrors+1 legs. It is mutable
	// (ControllerModifyVolume): the agent converts the LV when it changes,
	// and status.mirrors follows once that is done.
	// +optional
	Mirrors int `json:"mirrors,omitempty"`
	// RAID is raid5, raid6 or raid10: an LV of that level with stripes
	// data stripes. Fixed at creation.
	// +optional
	// +kubebuilder:validation:Enum=raid5;raid6;raid10
	RAID string `json:"raid,omitempty"`
	// Integrity puts dm-integrity under each raid1 leg. Fixed at
	// creation.
	// +optional
	Integrity bool `json:"integrity,omitempty"`
}

// ContentSource names a LogicalVolumeSnapshot or a LogicalVolume.
type ContentSource struct {
	// Kind is "snapshot" or "volume".
	// +kubebuilder:validation:Enum=snapshot;volume
	Kind string `json:"kind"`
	// ID is the CSI ID of the source (node/vg/lv).
	ID string `json:"id"`
}

// LogicalVolumeStatus is what the node agent reports.
type LogicalVolumeStatus struct {
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// VolumeID is the CSI volume ID, node/vg/lv.
	// +optional
	VolumeID string `json:"volumeID,omitempty"`
	// SizeBytes is the LV's size.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// Published is true while the LV is active for its published node.
	// +optional
	Published bool `json:"published,omitempty"`
	// DevicePath is where the device appears on the node while published.
	// +optional
	DevicePath string `json:"devicePath,omitempty"`
	// Mirrors is the raid1 legs beyond the first that the LV has been
	// brought to: spec.type.mirrors, once a change of it is done.
	// +optional
	Mirrors int `json:"mirrors,omitempty"`
	// Encrypted is true when the LV holds LUKS2 (encryption at rest).
	// +optional
	Encrypted bool `json:"encrypted,omitempty"`
	// IOLimits are the limits the LV records and the node has put on the
	// pods using it: spec.ioLimits, once a change of them is done.
	// +optional
	IOLimits IOLimits `json:"ioLimits,omitempty"`
	// WriteCache is the write cache the LV has been given:
	// spec.writeCache, once a change of it is done.
	// +optional
	WriteCache *WriteCache `json:"writeCache,omitempty"`
	// CaughtUpTo is the snapshot whose bytes the LV holds after a
	// catch-up: spec.catchUpTo, once the catch-up is done.
	// +optional
	CaughtUpTo string `json:"caughtUpTo,omitempty"`
	// Health lists adverse conditions, empty when healthy. The agent sets
	// it at each reconcile and brings it up to date at its storage report
	// (every 30 s), with a Warning event when a problem appears and a
	// Normal one when it clears; a message's figures are as of when its
	// problem appeared.
	// +optional
	Health []HealthProblem `json:"health,omitempty"`
	// Error is the last failure, nil after a success.
	// +optional
	Error *OperationError `json:"error,omitempty"`
	// ObservedGeneration is the spec generation this status is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (the last reconcile succeeded; when not, the
	// reason is the failure's CSI code).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// LogicalVolume is one Carve volume: an LV on one node.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=clv
// +kubebuilder:selectablefield:JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="VG",type=string,JSONPath=`.spec.volumeGroup`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.sizeBytes`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Published",type=string,JSONPath=`.spec.publishedNode`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LogicalVolume struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   LogicalVolumeSpec   `json:"spec"`
	Status LogicalVolumeStatus `json:"status,omitempty"`
}

// LogicalVolumeList lists LogicalVolumes.
// +kubebuilder:object:root=true
type LogicalVolumeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LogicalVolume `json:"items"`
}
