package v1alpha1

import "k8s.io/apimachinery/pkg/fields"

// NodeNameField is the field LogicalVolumes and LogicalVolumeSnapshots are
// selectable by (the CRDs' selectableFields): a node agent lists and
// watches only its own node's objects.
const NodeNameField = "spec.nodeName"

// OnNode selects the objects of one node, by NodeNameField.
func OnNode(node string) fields.Selector { return fields.OneTermEqualSelector(NodeNameField, node) }
