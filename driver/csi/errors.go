package csi

import (
	"fmt"

	"carve.dev/carve/driver/volume"
)

// Handlers return plain Go errors that wrap a sentinel of package volume (or
// of lvm); the server's interceptor turns them into gRPC status codes
// through volume.CodeOf, the one place where that mapping lives.

func invalidArgument(format string, args ...any) error {
	return fmt.Errorf("%w: %s", volume.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

func errInvalidToken(token string) error {
	return fmt.Errorf("%w %q", volume.ErrInvalidToken, token)
}
