package rma

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
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
//
// A rank declared failed while it still runs — it was stopped (SIGSTOP, a debugger) or starved
// past the failure timeout, and resumes — is expelled: the rendezvous tells it (its own failure
// notice, then it closes its connection and ignores its late frames), and every later operation
// of its own returns an error wrapping ErrExpelled and ErrPeerFailed naming itself. Its late
// traffic cannot change survivors' memory: over the network, survivors moved their queue pairs
// to it to ERROR when they learned the failure (a queue pair in ERROR drops what arrives, [IBA]
// ch. 10) and refuse its new connections; over shared memory, where the expelled process would
// write survivors' memory itself, the same-node survivors kill it (fence: SIGKILL through a
// pidfd opened at Init) as soon as they learn the failure — a rank declared failed is made to
// fail, as fail-stop semantics require. Where no pidfd can be opened, every operation to a
// same-node peer first checks this rank's membership instead (checkMember: the rendezvous
// answered one of its heartbeats less than half the failure timeout ago, else it asks and waits
// for the answer), at the cost of a clock read per operation. What remains: a process resumed
// in the instant between its declaration and the survivors' kill can still complete the
// operation it was stopped in (a copy into a same-node peer's segment, an accumulate or atomic
// on it, a lock word).

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
	// member checks this rank's membership before a same-node peer's memory is written
	// (internal/bootstrap's client: Member), or nil (no such bootstrap).
	member memberChecker
	// lease: operations to same-node peers check membership first (checkMember), because some
	// same-node peer could not be fenced through a pidfd (fenceNode); decided at Init.
	lease bool
	// fenceMu guards the peers' pidfds between fence (the bootstrap's callback) and closeFences
	// (teardown), so a descriptor is never used after it was closed (and reused).
	fenceMu sync.Mutex
}

// memberChecker is implemented by a bootstrap that tells whether this rank is still a member of
// the job (internal/bootstrap's client: nil while the rendezvous answers its heartbeats, its own
// failure once it was declared failed, ctx's error).
type memberChecker interface {
	Member(ctx context.Context) error
}

// checkMember returns this rank's expulsion (ErrExpelled) when the bootstrap says it is no
// longer a member, ctx's error when the question could not be answered in time, nil otherwise.
func (r *Runtime) checkMember(ctx context.Context) error {
	err := r.fail.member.Member(ctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return err
	}
	r.peerFailed(r.rank, err)
	return r.failedErr(r.rank)
}

// watchFailures sizes the failed set and subscribes to the bootstrap's failure reports.
func (r *Runtime) watchFailures() {
	r.fail.errs = make([]atomic.Pointer[error], r.size)
	if fd, ok := r.boot.(FailureDetector); ok {
		fd.OnPeerFailure(r.peerFailed)
	}
	if m, ok := r.boot.(memberChecker); ok {
		r.fail.member = m
	}
}

// peerFailed records that rank failed (the bootstrap's callback).
func (r *Runtime) peerFailed(rank int, cause error) {
	if rank < 0 || rank >= len(r.fail.errs) {
		return
	}
	var err error
	switch {
	case rank == r.rank && cause != nil:
		err = fmt.Errorf("%w: %w: %w", ErrExpelled, ErrPeerFailed, cause)
	case rank == r.rank:
		err = fmt.Errorf("%w: %w: rank %d", ErrExpelled, ErrPeerFailed, rank)
	case cause != nil:
		err = fmt.Errorf("%w: %w", ErrPeerFailed, cause)
	default:
		err = fmt.Errorf("%w: rank %d", ErrPeerFailed, rank)
	}
	if r.fail.errs[rank].CompareAndSwap(nil, &err) {
		r.fail.any.Store(true)
		r.log.Warn().Int("peer", rank).Err(err).Msg("peer failed")
		r.fence(rank)
		r.abortPeer(rank, err)
	}
}

// fenceNode opens a pidfd of every same-node peer that runs in another process, so that a peer
// declared failed can be stopped for good (fence). Where one cannot be opened (pidfd_open needs
// Linux 5.3), operations to same-node peers check this rank's membership instead (lease): it
// returns true then.
func (r *Runtime) fenceNode() (fallback bool) {
	me := os.Getpid()
	for _, pe := range r.peers {
		if pe.qp == nil || pe.pid == me || pe.pid <= 0 {
			continue
		}
		fd, err := unix.PidfdOpen(pe.pid, 0)
		if err != nil {
			r.log.Debug().Err(err).Int("peer", pe.rank).Msg("rma: no pidfd of a same-node peer: membership checks instead")
			fallback = true
			continue
		}
		pe.pidfd = fd
	}
	return fallback
}

// fence makes a failed same-node rank fail-stop: SIGKILL through its pidfd (which names that
// process, never a later one with the same pid). A rank declared failed while its process still
// runs — stopped or starved past the failure timeout — could otherwise resume and write this
// node's shared memory; over the network its late packets are refused anyway (abortPeer). A
// process that already ended is not signalled again (ESRCH).
func (r *Runtime) fence(rank int) {
	r.fail.fenceMu.Lock()
	defer r.fail.fenceMu.Unlock()
	pe := r.peers[rank]
	if pe == nil || pe.pidfd < 0 || rank == r.rank {
		return
	}
	if err := unix.PidfdSendSignal(pe.pidfd, unix.SIGKILL, nil, 0); err == nil {
		r.log.Info().Int("peer", rank).Int("pid", pe.pid).Msg("rma: failed same-node rank killed (fail-stop: it cannot write this node's memory late)")
	}
}

// closeFences closes the pidfds of fenceNode (teardown).
func (r *Runtime) closeFences() {
	r.fail.fenceMu.Lock()
	defer r.fail.fenceMu.Unlock()
	for _, pe := range r.peers {
		if pe != nil && pe.pidfd >= 0 {
			_ = unix.Close(pe.pidfd)
			pe.pidfd = -1
		}
	}
}

// abortPeer gives up the network connections to a failed rank, so the operations in flight to
// it complete failed now rather than after retries and the partition timeout (a blocking one
// then returns the failure: finish).
// When rank is this rank (expelled), every network connection is given up: its operations in
// flight end with err and none of its traffic is retried.
func (r *Runtime) abortPeer(rank int, err error) {
	r.odMu.Lock() // pe.ch of a peer connected on demand is installed under it
	defer r.odMu.Unlock()
	if r.odClosed {
		return // torn down
	}
	for p, pe := range r.peers {
		if p == r.rank || rank != r.rank && p != rank || pe.ch.Load() == nil { // node peers have no channel
			continue // never connected, or a node peer (nothing is ever in flight to it)
		}
		for _, c := range pe.ch.Load().Subchannels() {
			c.Abort(err)
		}
		if rc := pe.rc; rc != nil && rc != pe.ch.Load() {
			for _, c := range rc.Subchannels() {
				c.Abort(err)
			}
		}
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

// opFailedErr is why an operation to rank p failed when its requests were flushed: p's failure,
// or this rank's expulsion (abortPeer flushed every connection), or nil.
func (r *Runtime) opFailedErr(p int) error {
	if err := r.failedErr(p); err != nil {
		return err
	}
	return r.failedErr(r.rank)
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
