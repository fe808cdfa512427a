package rma

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/multirail"
)

// signalSlots is how many signals to network peers a barrier keeps in flight before it reaps
// them all (more than any algorithm's rounds; only a linear release of many ranks fills it).
const signalSlots = 64

// signals holds the RDMA barriers' flag writes to network peers that are posted but not yet
// reaped [Kini03 §3]: a rank posts the write of round k and goes on to await its own flag
// without waiting for the write's completion; the barrier reaps the completions before it
// returns (most have arrived while it awaited its flags). One per Runtime: barriers of a
// runtime do not overlap.
type signals struct {
	res  [signalSlots][8]byte // each posted swap's fetched word: in use until it is reaped
	reqs [signalSlots]signalReq
	n    int // posted and not reaped: reqs[:n], res[:n]
}

type signalReq struct {
	net *multirail.Network
	req *multirail.Request
}

// signal writes id into flag word slot of rank to, whole (the polled word is never read torn).
// To this rank and to a node peer it is a release store through the mapped view (the writer
// goes on at once: no wait for the cache line), or a CPU atomic swap without a view; to a
// network peer an 8-byte atomic swap work request, posted, which reapSignals completes. Errors:
// those of the issue (ErrPeerFailed, ErrTransport... naming rank to).
func (r *Runtime) signal(ctx context.Context, to, slot int, id uint64) error {
	return r.signalOn(ctx, r.sys, to, slot, id)
}

// signalOn is signal into the flag words of seg (the runtime's own, or a group's).
func (r *Runtime) signalOn(ctx context.Context, seg *Segment, to, slot int, id uint64) error {
	pe, err := r.peer(ctx, to)
	if err != nil {
		return err
	}
	rt := pe.route
	switch rt.kind {
	case routeSelf, routeNode:
		if v := seg.view(pe); v != nil {
			return v.StoreRelease64(8*slot, id) // a store, as MPI's shared-memory flags
		}
		_, err := rt.atomic(ctx, ibv.OpAtomicSwap64, seg, 8*slot, id, 0)
		return err
	case routeDial:
		if err := r.dial(ctx, pe); err != nil {
			return err
		}
	}
	s := &r.sig
	if s.n == signalSlots {
		if err := r.reapSignals(ctx); err != nil {
			return err
		}
	}
	raddr, rkey := seg.remoteAddr(pe, 8*slot)
	nw, req := r.begin(pe, true)
	ierr := pe.ch.Load().Atomic(ctx, req, ibv.OpAtomicSwap64, s.res[s.n][:], raddr, rkey, id, 0)
	if ierr != nil {
		_, err := r.finish(ctx, nw, req, fmt.Errorf("%w: rank %d: %w", ErrTransport, to, ierr), true)
		return err
	}
	nw.Issued(req)
	s.reqs[s.n] = signalReq{net: nw, req: req}
	s.n++
	return nil
}

// reapSignals waits for every posted signal to complete, and returns the first one's error
// (ErrPeerFailed or ErrPartition of the target, else ErrTransport; each names the target). It
// always waits for all of them, past ctx's end too, so that no fetched word stays in use: a dead
// target's requests are flushed and a partition ends them at GOARMCI_PARTITION_TIMEOUT.
func (r *Runtime) reapSignals(ctx context.Context) error {
	s := &r.sig
	var first error
	for i := range s.n {
		sr := &s.reqs[i]
		err := sr.net.Wait(context.WithoutCancel(ctx), sr.req)
		if err != nil && first == nil {
			to := sr.req.Tag
			if ferr := r.opFailedErr(to); ferr != nil {
				first = ferr // the target failed: its requests were flushed (abortPeer)
			} else {
				first = fmt.Errorf("%w: signal to rank %d: %w", ErrTransport, to, err)
			}
		}
		sr.net.Release(sr.req)
		*sr = signalReq{}
	}
	s.n = 0
	return first
}

// reaped is err, or else the error of reaping the posted signals: what a barrier returns. Every
// barrier returns through it, so no signal outlives its barrier.
func (r *Runtime) reaped(ctx context.Context, err error) error {
	if rerr := r.reapSignals(ctx); err == nil && rerr != nil {
		return fmt.Errorf("rma: barrier: %w", rerr)
	}
	return err
}
