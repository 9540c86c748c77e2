package volume

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ValidateNodeID checks a node ID (--node-id, and the node a CO names in a
// topology segment). The ID is the value of a volume's one topology
// segment, so CSI's rule for segment values applies (spec, Topology: at
// most 63 characters, alphanumerics, '-', '_' and '.', beginning and
// ending with an alphanumeric), which is Kubernetes' rule for the label
// value kubelet makes of it: its own check decides. It also keeps a volume
// ID "node/vg/lv" unambiguous, and out of paths and commands. Errors wrap
// ErrInvalidArgument.
func ValidateNodeID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: node ID is empty", ErrInvalidArgument)
	}
	if errs := validation.IsValidLabelValue(id); len(errs) > 0 {
		return fmt.Errorf("%w: node ID %q: %s", ErrInvalidArgument, id, strings.Join(errs, "; "))
	}
	return nil
}
