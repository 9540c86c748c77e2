// Package v1alpha1 holds Carve's custom resources, the transport between
// the controller and the node agents in cluster mode: the controller cannot
// reach a node's volume group, so it writes what it wants into these
// resources and the node agent of the volume's node makes LVM match them,
// with the same LVM semantics as standalone mode (driver/lvmvol).
//
// All resources are cluster-scoped. Their names derive from CSI names, so a
// retried CSI call finds the resource the first call made.
//
// +kubebuilder:object:generate=true
// +groupName=lvm.carve.dev
package v1alpha1
