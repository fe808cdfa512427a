package ibv

import "errors"

// Sentinel errors of the verbs layer. Every error returned by this package and its providers wraps
// one of them, so callers can test with errors.Is.
var (
	// ErrInvalidArgument: a malformed argument (bad size, unknown opcode, zero-length MR, ...); the
	// verbs call would return EINVAL.
	ErrInvalidArgument = errors.New("ibv: invalid argument")
	// ErrInvalidTransition: a Modify that the QP state machine does not allow from the current
	// state, or with a missing/forbidden attribute.
	ErrInvalidTransition = errors.New("ibv: invalid QP state transition")
	// ErrInvalidState: a post to a QP whose state does not accept it (e.g. PostSend before RTS).
	ErrInvalidState = errors.New("ibv: QP state does not allow this operation")
	// ErrQueueFull: the send or receive queue already holds max_send_wr / max_recv_wr requests.
	ErrQueueFull = errors.New("ibv: work queue full")
	// ErrInvalidKey: an lkey/rkey that names no MR (locally detected).
	ErrInvalidKey = errors.New("ibv: invalid memory key")
	// ErrOutOfBounds: a scatter/gather element outside the MR it names.
	ErrOutOfBounds = errors.New("ibv: access outside memory region")
	// ErrAccess: the MR's access flags do not allow the operation.
	ErrAccess = errors.New("ibv: access not permitted by memory region")
	// ErrBusy: the resource is still in use (deregistering an MR bound to a pending request,
	// destroying a CQ with QPs attached, closing a PD with live objects).
	ErrBusy = errors.New("ibv: resource busy")
	// ErrClosed: the device, QP or CQ was closed or destroyed.
	ErrClosed = errors.New("ibv: closed")
	// ErrUnreachable: no route to the destination address (provider could not connect).
	ErrUnreachable = errors.New("ibv: destination unreachable")
	// ErrUnsupported: the provider does not implement the operation.
	ErrUnsupported = errors.New("ibv: operation not supported by provider")
	// ErrNoProvider: no provider of the given name is registered.
	ErrNoProvider = errors.New("ibv: no such provider")
	// ErrFlushed: a work request flushed because its queue pair went to ERROR (WR_FLUSH_ERR):
	// it was not executed, whatever failed first.
	ErrFlushed = errors.New("ibv: work request flushed")
	// ErrRetryExceeded: the transport gave up retrying (RETRY_EXC_ERR, RNR_RETRY_EXC_ERR): no
	// path to the responder worked; also matches ErrUnreachable.
	ErrRetryExceeded = errors.New("ibv: transport retries exceeded")
)

// WCError is a failed work completion as an error (the status of ibv_wc), for callers that
// complete requests and report failures: errors.Is matches it with the sentinel the status
// means — ErrAccess (REM_ACCESS_ERR, LOC_ACCESS_ERR, LOC_PROT_ERR: a bad key, bounds or access
// flags), ErrRetryExceeded and ErrUnreachable (RETRY_EXC_ERR, RNR_RETRY_EXC_ERR: a dead path or
// peer), ErrFlushed (WR_FLUSH_ERR), ErrInvalidArgument (LOC_LEN_ERR, REM_INV_REQ_ERR,
// LOC_QP_OP_ERR) — so a bad rkey can be told from a dead path ([IBA] §11.6.2's status codes).
type WCError struct {
	Status WCStatus
}

func (e *WCError) Error() string { return "ibv: completion status " + e.Status.String() }

// Is reports whether target is the sentinel of e's status.
func (e *WCError) Is(target error) bool {
	switch e.Status {
	case WCRemAccessErr, WCLocAccessErr, WCLocProtErr:
		return target == ErrAccess
	case WCRetryExcErr, WCRNRRetryExcErr:
		return target == ErrRetryExceeded || target == ErrUnreachable
	case WCWRFlushErr:
		return target == ErrFlushed
	case WCLocLenErr, WCRemInvReqErr, WCLocQPOpErr:
		return target == ErrInvalidArgument
	}
	return false
}
