package rma

import (
	"fmt"
	"sync/atomic"
)

// Peer failure. A rank whose process ends before Finalize (it returns or exits early, crashes,
// is killed), that stays silent for the failure timeout while its host answers (stopped, hung),
// or that is unreachable for the partition timeout plus that, is declared failed by the
// bootstrap (internal/bootstrap: the rendezvous connection every rank keeps, whatever the
// launcher; GOARMCI_FAILURE_TIMEOUT) and reported to the runtime through FailureDetector. From
// then on every call of this rank that needs the failed rank returns an error wrapping
// ErrPeerFailed and naming it: new operations to it (Put, Get, Acc, Rmw, Lock, Fence, ...),
// operations in flight to it (its network connections are aborted), waits on it (Fence, Lock),
// and waits on the whole job (Barrier and its algorithms, the collectives, GA Sync), as ULFM's
// MPI_ERR_PROC_FAILED. Operations between survivors keep working; AllFence fences them. The
// failed set is checked where a call begins (Runtime.peer) and where it waits, not per poll of
// a transfer.

// FailureDetector is implemented by a Bootstrap that detects failed ranks (internal/bootstrap's
// client; rmatest's group, which injects failures). OnPeerFailure registers f, called once for
// every rank declared failed with an error describing the failure in the user's terms ("rank 1
// exited before Finalize"); failures known before the call are reported at once, later ones
// from a goroutine of the bootstrap, so f must not block.
type FailureDetector interface {
	OnPeerFailure(f func(rank int, cause error))
}

// failures is the runtime's set of failed ranks.
type failures struct {
	any  atomic.Bool             // some rank failed: the only load on the way of an operation
	errs []atomic.Pointer[error] // by rank: the error calls needing that rank return
}

// watchFailures sizes the failed set and subscribes to the bootstrap's failure reports.
func (r *Runtime) watchFailures() {
	r.fail.errs = make([]atomic.Pointer[error], r.size)
	if fd, ok := r.boot.(FailureDetector); ok {
		fd.OnPeerFailure(r.peerFailed)
	}
}

// peerFailed records that rank failed (the bootstrap's callback).
func (r *Runtime) peerFailed(rank int, cause error) {
	if rank < 0 || rank >= len(r.fail.errs) {
		return
	}
	var err error
	if cause != nil {
		err = fmt.Errorf("%w: %w", ErrPeerFailed, cause)
	} else {
		err = fmt.Errorf("%w: rank %d", ErrPeerFailed, rank)
	}
	if r.fail.errs[rank].CompareAndSwap(nil, &err) {
		r.fail.any.Store(true)
		r.log.Warn().Int("peer", rank).Err(err).Msg("peer failed")
		r.abortPeer(rank, err)
	}
}

// abortPeer gives up the network connections to a failed rank, so the operations in flight to
// it complete failed now rather than after retries and the partition timeout (a blocking one
// then returns the failure: finish).
func (r *Runtime) abortPeer(rank int, err error) {
	if rank == r.rank {
		return
	}
	r.odMu.Lock() // pe.ch of a peer connected on demand is installed under it
	defer r.odMu.Unlock()
	pe := r.peers[rank]
	if r.odClosed || pe.ch == nil { // node peers have no channel
		return // torn down, never connected, or a node peer (nothing is ever in flight to it)
	}
	for _, c := range pe.ch.Subchannels() {
		c.Abort(err)
	}
}

// failedErr is rank p's failure (wrapping ErrPeerFailed), or nil while it is alive.
func (r *Runtime) failedErr(p int) error {
	if !r.fail.any.Load() || p < 0 || p >= len(r.fail.errs) {
		return nil
	}
	if e := r.fail.errs[p].Load(); e != nil {
		return *e
	}
	return nil
}

// anyFailedErr is the failure of the lowest failed rank, or nil: what a wait on the whole job (a
// barrier) returns, since it can no longer complete.
func (r *Runtime) anyFailedErr() error {
	if !r.fail.any.Load() {
		return nil
	}
	for i := range r.fail.errs {
		if e := r.fail.errs[i].Load(); e != nil {
			return *e
		}
	}
	return nil
}

// FailedRanks returns the ranks declared failed so far, ascending (MPI_Comm_get_failed of
// ULFM); operations needing them return errors wrapping ErrPeerFailed.
func (r *Runtime) FailedRanks() []int {
	var out []int
	if !r.fail.any.Load() {
		return out
	}
	for i := range r.fail.errs {
		if r.fail.errs[i].Load() != nil {
			out = append(out, i)
		}
	}
	return out
}
