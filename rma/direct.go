package rma

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/ibv"
)

// Direct access to same-node parts of a segment (ARMCI's shared-memory path on SMP nodes:
// ARMCI_Put/Get between processes of one node are memory copies into the segment as mapped
// in the origin, [ARMCI]). A Put or Get (blocking or not: a non-blocking one completes at
// issue and returns no handle, as ARMCI allows) to a peer over shared memory copies
// straight into or out of a view of the peer's part (ibv.RemoteView, checked once against the
// part's rkey when first used), with no work request: the view is taken per (segment, peer)
// and given back by Free and Finalize. An accumulate adds through the view holding the region's
// accumulate lock word (RemoteView.Acc: the provider's, which every accumulate into the region
// takes, whichever process or provider executes it); without one it keeps work requests, as do
// operations of a channel that cannot map, or whose queue pair is not in RTS.

// noView marks a (segment, peer) whose part cannot be mapped: not tried again.
var noView = new(ibv.RemoteView)

// view returns the load/store view of pe's part of s, or nil when there is none (network
// peers, memory not in a shared buffer, a queue pair not in RTS).
func (s *Segment) view(pe *peer) *ibv.RemoteView {
	slot := &s.views[pe.rank]
	v := slot.Load()
	if v == nil {
		v = s.mapPart(pe)
		if !slot.CompareAndSwap(nil, v) {
			if v != noView {
				v.Release()
			}
			v = slot.Load()
		}
	}
	if v == noView || !v.Usable() {
		return nil
	}
	return v
}

// mappedPart is the fast path of a contiguous Put or Get to a same-node peer: proc's part of seg
// as its view maps it, when the view is taken and usable and nothing else needs deciding first
// (the runtime is alive, no rank has failed, no lease to check, no statistics to count). nil
// sends the operation down the full path, which maps the part on first use and returns the
// errors.
func (r *Runtime) mappedPart(seg *Segment, proc int) []byte {
	if !r.mappedFast || r.finalized.Load() || r.fail.any.Load() || seg.freed || uint(proc) >= uint(len(seg.views)) {
		return nil
	}
	v := seg.views[proc].Load()
	if v == nil || v == noView || !v.Usable() {
		return nil
	}
	return v.Mem
}

// mapPart maps pe's whole part of s through its queue pair (ibv.QP.MapRemote), or returns noView
// (an empty part; memory the provider cannot map). pe is a node peer.
func (s *Segment) mapPart(pe *peer) *ibv.RemoteView {
	rp := &s.remote[pe.rank]
	if rp.size == 0 {
		return noView
	}
	if !pe.qp.CanMapRemote() {
		return noView
	}
	v, err := pe.qp.MapRemote(rp.rkeys[pe.net], rp.addr, uint64(rp.size), ibv.AccessRemoteWrite|ibv.AccessRemoteRead|ibv.AccessRemoteAtomic)
	if err != nil {
		s.rt.log.Debug().Err(err).Int("rank", pe.rank).Int("segment", s.id).Msg("rma: no direct view; work requests")
		return noView
	}
	return v
}

// releaseViews gives back every view of s (Free, Finalize).
func (s *Segment) releaseViews() {
	for i := range s.views {
		if v := s.views[i].Swap(noView); v != nil && v != noView {
			v.Release()
		}
	}
}

// Mapped returns rank proc's whole part of seg as this process's loads and stores reach it:
// this rank's own part, or a same-node peer's through the shared-memory view that Put, Get and
// the atomics to it use (ARMCI's SMP path, [ARMCI]); nil, with no error, when proc is reached by
// work requests only (a network peer, memory the provider cannot map, a queue pair not in RTS).
// It checks what every operation to proc checks first (the runtime is alive, proc is a rank
// and has not failed, the segment is not freed) and moves nothing.
//
// The bytes are the target's memory itself: a word changed with the CPU's atomic instructions
// (sync/atomic on an aligned 4- or 8-byte word) is atomic with respect to Rmw, CompareSwap and
// CompareSwap32 on it from any rank, whichever process or provider executes them (they use the
// same instructions: ibv.ApplyAtomic). Plain loads and stores are as Get and Put through the
// view. The slice may be used until seg is freed or the runtime finalized; call Mapped again
// after anything that may have done either. Errors: those of every operation's rank checks
// (ErrFinalized, ErrBadRank, ErrPeerFailed, ErrExpelled, ctx's) and ErrFreed.
func (r *Runtime) Mapped(ctx context.Context, seg *Segment, proc int) ([]byte, error) {
	pe, err := r.peer(ctx, proc)
	if err != nil {
		return nil, err
	}
	if seg.freed {
		return nil, fmt.Errorf("%w: segment %d", ErrFreed, seg.id)
	}
	switch pe.route.kind {
	case routeSelf:
		return seg.local, nil
	case routeNode:
		if v := seg.view(pe); v != nil {
			return v.Mem, nil
		}
	}
	return nil, nil
}

// MappedStable reports whether slices Mapped returned for seg may still be used without calling
// Mapped again: the runtime is not finalized, seg is not freed, no rank has been declared failed,
// and operations to same-node peers need no membership check of their own (the lease of
// failure.go, where some same-node peer could not be fenced through a pidfd). A few loads: a
// caller that keeps Mapped's slices checks it before each use and calls Mapped (which returns
// the error) when it is false.
func (r *Runtime) MappedStable(seg *Segment) bool {
	return !r.finalized.Load() && !seg.freed && !r.fail.any.Load() && !r.fail.lease
}
