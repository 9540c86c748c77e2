package volume

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"carve.dev/carve/lvm"
)

// codeTable is ordered: the first kind the error wraps decides the code.
// Every sentinel of this package and of package lvm has a row (a test
// reads both packages' sources to hold that).
var codeTable = []struct {
	kind error
	code codes.Code
}{
	{ErrInvalidArgument, codes.InvalidArgument},
	{ErrOperationPending, codes.Aborted},
	{ErrInvalidToken, codes.Aborted},
	{ErrDataPending, codes.Aborted},
	{ErrUnimplemented, codes.Unimplemented},
	{ErrNotFound, codes.NotFound},
	{ErrFailedPrecondition, codes.FailedPrecondition},
	{ErrResourceExhausted, codes.ResourceExhausted},
	{ErrInvalidID, codes.NotFound},
	{ErrVolumeNotFound, codes.NotFound},
	{ErrSnapshotNotFound, codes.NotFound},
	{ErrSourceMismatch, codes.InvalidArgument},
	{ErrBadPool, codes.FailedPrecondition},
	{ErrNodeNotFound, codes.NotFound},
	{ErrNameConflict, codes.AlreadyExists},
	{ErrOutOfRange, codes.OutOfRange},
	{ErrOffsetOutOfRange, codes.OutOfRange},
	{ErrInUse, codes.FailedPrecondition},
	{ErrUnmanagedVG, codes.InvalidArgument},
	{ErrVGUnreadable, codes.Unavailable},
	{ErrNotManaged, codes.FailedPrecondition},
	{ErrPublishLimit, codes.ResourceExhausted},
	{ErrWrongNode, codes.ResourceExhausted},
	{ErrMountConflict, codes.AlreadyExists},
	{ErrFilesystemMismatch, codes.FailedPrecondition},
	{ErrUnsupportedFilesystem, codes.InvalidArgument},
	{ErrToolMissing, codes.FailedPrecondition},
	{ErrCannotFormat, codes.FailedPrecondition},
	{ErrFilesystemDamaged, codes.FailedPrecondition},
	{ErrBadMountFlag, codes.InvalidArgument},
	{ErrUnsafeTarget, codes.FailedPrecondition},
	{ErrInvalidPath, codes.InvalidArgument},
	// A wrong key is no malformed request (a missing one is
	// INVALID_ARGUMENT): the request is whole, but its credential does not
	// unlock the volume, as PERMISSION_DENIED says. The CO retries it as
	// it does any failed NodeStage; the code tells the operator to fix the
	// Secret, not the StorageClass or the claim.
	{ErrWrongKey, codes.PermissionDenied},
	// A full metadata area is a lack of space like any other (it wraps
	// ErrNoSpace): the CO places the volume on another node.
	{lvm.ErrMetadataFull, codes.ResourceExhausted},
	// What the node's kernel cannot do is the node's state, not the
	// request's: loading the module there makes the retry succeed.
	{lvm.ErrKernelTarget, codes.FailedPrecondition},
	{lvm.ErrNoSpace, codes.ResourceExhausted},
	{lvm.ErrInvalidName, codes.InvalidArgument},
	{lvm.ErrInvalidArgument, codes.InvalidArgument},
	{lvm.ErrPVMissing, codes.Unavailable},
	{lvm.ErrNotFound, codes.NotFound},
	{lvm.ErrAlreadyExists, codes.AlreadyExists},
	{lvm.ErrHasDependents, codes.FailedPrecondition},
	{lvm.ErrBusy, codes.FailedPrecondition},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{context.Canceled, codes.Canceled},
}

// CodeOf maps an error to its gRPC code; a gRPC status keeps its own, and
// unknown errors are INTERNAL. The CSI services answer with it, and the
// node agent records it in a resource's status, so that the controller
// answers the CO with the code the node's failure deserves.
func CodeOf(err error) codes.Code {
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

// Status converts an error into the gRPC status a caller sees; nil stays
// nil, and a status passes as it is.
func Status(err error) error {
	if err == nil {
		return nil
	}
	if _, isStatus := status.FromError(err); isStatus {
		return err
	}
	return status.Error(CodeOf(err), err.Error())
}
