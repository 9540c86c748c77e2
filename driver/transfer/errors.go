package transfer

import (
	"errors"
	"fmt"

	"carve.dev/carve/driver/volume"
)

// Code says why a server stopped a transfer, in its error frame.
type Code byte

const (
	// CodeFailed: the server failed on its side (a read error); a later
	// try may work.
	CodeFailed Code = 1
	// CodeRefused: the peer may not read this source (Authorizer).
	CodeRefused Code = 2
	// CodeNotFound: no such source on the server's node.
	CodeNotFound Code = 3
	// CodeBusy: the server runs as many transfers as it allows.
	CodeBusy Code = 4
	// CodeBadRequest: the request broke the protocol.
	CodeBadRequest Code = 5
)

var (
	// ErrRefused: the server refused the request (the peer may not read
	// that source). It wraps volume.ErrFailedPrecondition: a retry gets
	// the same answer until the cluster's state changes.
	ErrRefused = fmt.Errorf("%w: the source's node refused the transfer", volume.ErrFailedPrecondition)
	// ErrBusy: the server runs as many transfers as it allows; try later.
	ErrBusy = fmt.Errorf("%w: the source's node is busy with other transfers", volume.ErrOperationPending)
	// ErrMismatch: what the receiver read back differs from what was sent.
	ErrMismatch = errors.New("the data written differs from the data sent")
	// ErrProtocol: the peer broke the protocol.
	ErrProtocol = errors.New("transfer protocol error")
	// ErrUnreachable: no connection to the source's node could be opened
	// (refused, no route, timed out). A try later may work; how long to
	// keep trying is the caller's to decide (ErrGaveUp).
	ErrUnreachable = errors.New("the source's node cannot be reached")
	// ErrGaveUp: the source's node stayed unreachable for as long as a
	// receiver waits before anything of the source was in. It wraps
	// volume.ErrResourceExhausted: under WaitForFirstConsumer the CO then
	// puts the claim's pod on a node again (external-provisioner's
	// reschedule), which may be the snapshot's own, instead of waiting
	// for a node that may never come back.
	ErrGaveUp = fmt.Errorf("%w: gave up on the source's node", volume.ErrResourceExhausted)
)

// remoteError is the error a server's error frame stands for, wrapping the
// sentinel of its code.
func remoteError(code Code, msg string) error {
	var base error
	switch code {
	case CodeRefused:
		base = ErrRefused
	case CodeNotFound:
		base = volume.ErrNotFound
	case CodeBusy:
		base = ErrBusy
	case CodeBadRequest:
		base = ErrProtocol
	default:
		return fmt.Errorf("the source's node failed: %s", msg)
	}
	return fmt.Errorf("%w: %s", base, msg)
}

// codeOf is the code a server sends for err, an error of its Authorizer
// or Source.
func codeOf(err error) Code {
	switch {
	case errors.Is(err, ErrRefused):
		return CodeRefused
	case errors.Is(err, volume.ErrNotFound), errors.Is(err, volume.ErrVolumeNotFound), errors.Is(err, volume.ErrSnapshotNotFound):
		return CodeNotFound
	case errors.Is(err, ErrBusy):
		return CodeBusy
	case errors.Is(err, ErrProtocol):
		return CodeBadRequest
	}
	return CodeFailed
}
