package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeStorageStatus is a node's storage as its agent last read it. The
// controller answers GetCapacity from it without any LVM call.
type NodeStorageStatus struct {
	// VolumeGroups served on the node.
	// +optional
	VolumeGroups []VolumeGroupStatus `json:"volumeGroups,omitempty"`
	// OverprovisionRatio of thin pools on this node.
	// +optional
	OverprovisionRatio string `json:"overprovisionRatio,omitempty"`
	// UpdateTime is when the agent last wrote this report: when what it
	// reports changed, and at least every ten minutes.
	// +optional
	UpdateTime metav1.Time `json:"updateTime,omitempty"`
	// OrphanedVolumes are Carve's LVs on this node ("VG/LV") that no
	// LogicalVolume claims, seen in two reports in a row. Carve never
	// removes them: they may hold data; an administrator decides.
	// +optional
	OrphanedVolumes []string `json:"orphanedVolumes,omitempty"`
	// MissingVolumes are LVs ("VG/LV") of LogicalVolumes on this node that
	// were carved and are gone, seen in two reports in a row. Carve never
	// recreates them blank.
	// +optional
	MissingVolumes []string `json:"missingVolumes,omitempty"`
	// DiskRefusals are the disks the node's disk declaration selects that
	// the agent will not take, each with why (it holds data, a partition
	// table, another VG's label ...), for a person to read and decide:
	// Carve takes only blank disks and never wipes one. Empty when every
	// selected disk is taken, or when no declaration applies.
	// +optional
	DiskRefusals []DiskRefusal `json:"diskRefusals,omitempty"`
	// TransferAddress is where other nodes' agents reach this node's
	// transfer server (host:port), to copy a snapshot of this node onto
	// theirs over mutual TLS. Empty while the node has no transfer
	// certificate yet, or serves no transfers.
	// +optional
	TransferAddress string `json:"transferAddress,omitempty"`
}

// DiskRefusal is a disk a declaration selects for a volume group that the
// agent will not take.
type DiskRefusal struct {
	VolumeGroup string `json:"volumeGroup"`
	Device      string `json:"device"`
	Reason      string `json:"reason"`
}

// VolumeGroupStatus is one VG's space and health.
type VolumeGroupStatus struct {
	Name       string `json:"name"`
	SizeBytes  int64  `json:"sizeBytes"`
	FreeBytes  int64  `json:"freeBytes"`
	ExtentSize int64  `json:"extentSize"`
	// PVFreeBytes is each allocatable PV's free space (raid1 and stripes
	// need distinct PVs).
	// +optional
	PVFreeBytes []int64 `json:"pvFreeBytes,omitempty"`
	// +optional
	ThinPools []ThinPoolStatus `json:"thinPools,omitempty"`
	// Health lists the VG's problems, empty when it is healthy:
	// MissingPhysicalVolume (Degraded) while a PV is missing, when Carve
	// changes none of its LVs; VolumeGroupUnreadable (Inaccessible) while
	// lvm2 cannot read it, its sizes then 0.
	// +optional
	Health []HealthProblem `json:"health,omitempty"`
	// MetadataSizeBytes and MetadataFreeBytes are the VG's metadata area
	// and what is left of it for new LVs; with less than 16 KiB left the
	// node reports no capacity (lvm2 would refuse new volumes).
	// +optional
	MetadataSizeBytes int64 `json:"metadataSizeBytes,omitempty"`
	// +optional
	MetadataFreeBytes int64 `json:"metadataFreeBytes,omitempty"`
	// Tags are the VG's lvm2 tags: a StorageClass may choose VGs by one
	// (volumeGroups: "@tag").
	// +optional
	Tags []string `json:"tags,omitempty"`
}

// ThinPoolStatus is one thin pool's space.
type ThinPoolStatus struct {
	Name            string `json:"name"`
	SizeBytes       int64  `json:"sizeBytes"`
	FreeBytes       int64  `json:"freeBytes"`
	DataPercent     string `json:"dataPercent"`
	MetadataPercent string `json:"metadataPercent"`
}

// NodeStorage reports one node's volume groups; its name is the node's.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cns
// +kubebuilder:printcolumn:name="VGs",type=string,JSONPath=`.status.volumeGroups[*].name`
// +kubebuilder:printcolumn:name="Free",type=string,JSONPath=`.status.volumeGroups[*].freeBytes`
// +kubebuilder:printcolumn:name="Orphans",type=string,JSONPath=`.status.orphanedVolumes`
// +kubebuilder:printcolumn:name="Missing",type=string,JSONPath=`.status.missingVolumes`
// +kubebuilder:printcolumn:name="Updated",type=date,JSONPath=`.status.updateTime`
type NodeStorage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status NodeStorageStatus `json:"status,omitempty"`
}

// NodeStorageList lists NodeStorages.
// +kubebuilder:object:root=true
type NodeStorageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeStorage `json:"items"`
}
