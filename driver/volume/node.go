package volume

import "fmt"

// MaxNodeIDLen bounds a node ID: CSI's limit on a topology segment's value.
const MaxNodeIDLen = 63

// ValidateNodeID checks a node ID (--node-id, and the node a CO names in a
// topology segment). The ID is the value of a volume's one topology
// segment, so CSI's rule for segment values applies (spec, Topology: at
// most 63 characters, alphanumerics, '-', '_' and '.', beginning and
// ending with an alphanumeric), which Kubernetes also asks of the label
// kubelet makes of it. It also keeps a volume ID "node/vg/lv" unambiguous,
// and out of paths and commands. Errors wrap ErrInvalidArgument.
func ValidateNodeID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: node ID is empty", ErrInvalidArgument)
	case len(id) > MaxNodeIDLen:
		return fmt.Errorf("%w: node ID %q is longer than %d characters", ErrInvalidArgument, id, MaxNodeIDLen)
	case !isAlnum(id[0]) || !isAlnum(id[len(id)-1]):
		return fmt.Errorf("%w: node ID %q must begin and end with a letter or digit", ErrInvalidArgument, id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return fmt.Errorf("%w: node ID %q contains %q (allowed: letters, digits, '-', '_', '.')", ErrInvalidArgument, id, c)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
