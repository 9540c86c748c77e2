package driver

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"carve.dev/carve/driver/lvmvol"
	"carve.dev/carve/driver/nodefs"
	"carve.dev/carve/driver/nodepath"
	"carve.dev/carve/lvm"
)

// The driver's own error kinds. Handlers return plain Go errors that wrap one
// of these or a sentinel of lvmvol, nodefs or lvm; the server's interceptor
// turns them into gRPC status codes through codeTable, the one place where
// that mapping lives.
var (
	errInvalidArgument    = errors.New("invalid argument")
	errNotFound           = errors.New("not found")
	errFailedPrecondition = errors.New("failed precondition")
	errResourceExhausted  = errors.New("resource exhausted")
	errUnimplemented      = errors.New("not implemented")
	// errPending: another operation holds the volume (CSI: ABORTED).
	errPending = errors.New("an operation on this volume is in progress")
)

func invalidArgument(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalidArgument, fmt.Sprintf(format, args...))
}

// codeTable is ordered: the first kind the error wraps decides the code.
var codeTable = []struct {
	kind error
	code codes.Code
}{
	{errInvalidArgument, codes.InvalidArgument},
	{errPending, codes.Aborted},
	{errAbortedToken, codes.Aborted},
	{lvmvol.ErrDataPending, codes.Aborted},
	{errUnimplemented, codes.Unimplemented},
	{errNotFound, codes.NotFound},
	{errFailedPrecondition, codes.FailedPrecondition},
	{errResourceExhausted, codes.ResourceExhausted},
	{lvmvol.ErrInvalidID, codes.NotFound},
	{lvmvol.ErrVolumeNotFound, codes.NotFound},
	{lvmvol.ErrSnapshotNotFound, codes.NotFound},
	{lvmvol.ErrSourceMismatch, codes.InvalidArgument},
	{lvmvol.ErrBadPool, codes.FailedPrecondition},
	{lvmvol.ErrNodeNotFound, codes.NotFound},
	{lvmvol.ErrNameConflict, codes.AlreadyExists},
	{lvmvol.ErrOutOfRange, codes.OutOfRange},
	{lvmvol.ErrInUse, codes.FailedPrecondition},
	{lvmvol.ErrUnmanagedVG, codes.InvalidArgument},
	{lvmvol.ErrNotManaged, codes.FailedPrecondition},
	{lvmvol.ErrPublishLimit, codes.ResourceExhausted},
	{lvmvol.ErrWrongNode, codes.ResourceExhausted},
	{nodefs.ErrMountConflict, codes.AlreadyExists},
	{nodefs.ErrFilesystemMismatch, codes.FailedPrecondition},
	{nodefs.ErrToolMissing, codes.FailedPrecondition},
	{nodefs.ErrCannotFormat, codes.FailedPrecondition},
	{nodefs.ErrBadMountFlag, codes.InvalidArgument},
	{nodefs.ErrUnsafeTarget, codes.FailedPrecondition},
	{nodepath.ErrInvalidPath, codes.InvalidArgument},
	{lvm.ErrNoSpace, codes.ResourceExhausted},
	{lvm.ErrInvalidName, codes.InvalidArgument},
	{lvm.ErrNotFound, codes.NotFound},
	{lvm.ErrAlreadyExists, codes.AlreadyExists},
	{lvm.ErrBusy, codes.FailedPrecondition},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{context.Canceled, codes.Canceled},
}

// CodeOf maps an error to its gRPC code; unknown errors are INTERNAL. The
// node agent records it in a resource's status, so that the controller
// answers the CO with the code the node's failure deserves.
func CodeOf(err error) codes.Code { return codeOf(err) }

// codeOf maps an error to its gRPC code; unknown errors are INTERNAL.
func codeOf(err error) codes.Code {
	for _, e := range codeTable {
		if errors.Is(err, e.kind) {
			return e.code
		}
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Internal
}

// toStatus converts a handler's error into the gRPC status the CO sees.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, isStatus := status.FromError(err); isStatus {
		return err
	}
	return status.Error(codeOf(err), err.Error())
}

// errAbortedToken: a ListVolumes starting token we never handed out.
var errAbortedToken = errors.New("invalid starting token")

func errInvalidToken(token string) error {
	return fmt.Errorf("%w %q", errAbortedToken, token)
}
