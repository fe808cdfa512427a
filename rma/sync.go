package rma

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/accum"
)

// Fence blocks until every operation this rank issued to proc has completed at proc
// (ARMCI_Fence).
func (r *Runtime) Fence(ctx context.Context, proc int) error {
	pe, err := r.peer(proc)
	if err != nil {
		return err
	}
	if pe.net < 0 || pe.outstanding.Load() == 0 {
		return nil // nothing in flight (blocking operations on shm complete inside the call)
	}
	n := r.nets[pe.net].net
	return pollUntil(ctx, func() bool {
		if pe.outstanding.Load() == 0 {
			return true
		}
		n.Progress()
		return pe.outstanding.Load() == 0
	})
}

// AllFence blocks until every operation this rank issued has completed at its target
// (ARMCI_AllFence).
func (r *Runtime) AllFence(ctx context.Context) error {
	if err := r.check(); err != nil {
		return err
	}
	for p := range r.peers {
		if err := r.Fence(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// WaitAll completes every outstanding non-blocking operation of this rank (ARMCI_WaitAll).
func (r *Runtime) WaitAll(ctx context.Context) error { return r.AllFence(ctx) }

// Barrier synchronizes all ranks (ARMCI_Barrier): it first completes this rank's outstanding
// operations (AllFence), then runs the RDMA dissemination barrier of seed 001 §3 ("RDS"): in
// round k every rank writes the barrier's id into flag k of rank (me+2^k) mod N and polls its
// own flag k until the id written by rank (me−2^k) mod N arrives. The ids only grow, so the
// flags never need resetting (seed 001 §4, "barrier_id"). The write is an 8-byte atomic swap
// rather than an RDMA write so the polled word can never be read torn.
func (r *Runtime) Barrier(ctx context.Context) error {
	if err := r.AllFence(ctx); err != nil {
		return err
	}
	return r.barrier(ctx)
}

func (r *Runtime) barrier(ctx context.Context) error {
	if r.size == 1 {
		return nil
	}
	r.barrierID++
	id := r.barrierID
	flags := r.sys.local[:flagBytes]
	var old [8]byte
	for k, dist := 0, 1; dist < r.size; k, dist = k+1, dist*2 {
		to := (r.rank + dist) % r.size
		pe := r.peers[to]
		raddr, rkey, err := r.sys.target(pe, 8*k, 8)
		if err != nil {
			return err
		}
		if err := r.atomic(ctx, pe, ibv.OpAtomicSwap64, old[:], raddr, rkey, id, 0); err != nil {
			return fmt.Errorf("rma: barrier round %d to rank %d: %w", k, to, err)
		}
		slot := flags[8*k : 8*k+8]
		if err := pollUntil(ctx, func() bool {
			v, _ := accum.Load64(slot)
			return v >= id
		}); err != nil {
			return fmt.Errorf("rma: barrier round %d: waiting for rank %d: %w", k, (r.rank-dist+r.size)%r.size, err)
		}
	}
	return nil
}

// pollUntil waits for cond: it polls a little with runtime.Gosched, then yields the processor
// to other processes (sched_yield) between polls, and after a while backs off to short sleeps.
// Yielding rather than spinning matters when ranks outnumber cores (the common laptop case):
// the rank being waited for needs the core this one would burn (DESIGN.md §8: waking a parked
// process costs tens of µs, so park only after yielding for a while).
func pollUntil(ctx context.Context, cond func() bool) error {
	for i := 0; i < 64; i++ {
		if cond() {
			return nil
		}
		runtime.Gosched()
	}
	for i := 0; i < 4096; i++ {
		if cond() {
			return nil
		}
		if i%64 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		schedYield()
	}
	d := 20 * time.Microsecond
	for !cond() {
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(d)
		d = min(2*d, time.Millisecond)
	}
	return nil
}
