package window

import "errors"

// Sentinel errors. Every error this package returns wraps one of them (or a context error, or an
// rma error for a transport failure); test with errors.Is. An error from a synchronization call
// or an operation means nothing changed: no epoch opened or closed, nothing queued.
var (
	// ErrRMASync (MPI_ERR_RMA_SYNC): a call at the wrong time: an operation outside an access
	// epoch (or to a target the epoch does not cover), Complete without Start, Wait without Post,
	// Unlock without Lock, a nested Lock/LockAll/Start/Post, Flush outside a passive-target epoch,
	// Fence(ModeNoPrecede) after operations, Free with an epoch open.
	ErrRMASync = errors.New("window: RMA synchronization error")
	// ErrRMARange (MPI_ERR_RMA_RANGE): an access outside the target's window (negative
	// displacement, or displacement·disp_unit + length past its size, or a misaligned element).
	ErrRMARange = errors.New("window: access outside the target window")
	// ErrRMAConflict (MPI_ERR_RMA_CONFLICT): conflicting epochs: a passive-target epoch while an
	// active-target one (fence with operations, or Start) is open, or the reverse.
	ErrRMAConflict = errors.New("window: conflicting RMA epochs")
	// ErrRank (MPI_ERR_RANK): a target rank outside [0, Size).
	ErrRank = errors.New("window: rank out of range")
	// ErrArg (MPI_ERR_ARG, MPI_ERR_GROUP, MPI_ERR_ASSERT): a bad argument: unknown assert bits
	// for the call, a group with an out-of-range or repeated rank, a bad lock type, a
	// non-positive disp_unit or a negative size.
	ErrArg = errors.New("window: bad argument")
	// ErrType (MPI_ERR_TYPE): an unknown element type, or a buffer that is not a whole number of
	// elements (or not exactly one element where one is required).
	ErrType = errors.New("window: bad datatype or count")
	// ErrOp (MPI_ERR_OP): an unknown accumulate operation, or one MPI does not define for the
	// type (MAX/MIN on complex types, compare-and-swap on floating types).
	ErrOp = errors.New("window: bad accumulate operation")
	// ErrFreed: use of a window after Free.
	ErrFreed = errors.New("window: window freed")
)
