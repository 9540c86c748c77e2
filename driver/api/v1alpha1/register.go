package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of Carve's resources. The
// package depends on apimachinery only, so that anything can import it.
var GroupVersion = schema.GroupVersion{Group: "lvm.carve.dev", Version: "v1alpha1"}

var schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

// AddToScheme adds the types to a scheme.
var AddToScheme = schemeBuilder.AddToScheme

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&LogicalVolume{}, &LogicalVolumeList{},
		&LogicalVolumeSnapshot{}, &LogicalVolumeSnapshotList{},
		&LogicalVolumeGroupSnapshot{}, &LogicalVolumeGroupSnapshotList{},
		&NodeStorage{}, &NodeStorageList{},
		&VolumeMove{}, &VolumeMoveList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
