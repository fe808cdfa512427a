package rma

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/ibv"
)

// Mutexes are ticket locks held in a collective segment: mutex m of rank p is two 64-bit words
// (next ticket, now serving) in p's part. Lock takes a ticket with a remote fetch-and-add and
// polls "now serving" with remote atomic reads (fetch-and-add of 0) until its turn; Unlock
// advances "now serving". FIFO-fair, and no target-side thread is involved.
const mutexBytes = 16

// CreateMutexes creates n mutexes on this rank (ARMCI_Create_mutexes); collective, n may differ
// per rank. Mutexes created earlier are destroyed.
func (r *Runtime) CreateMutexes(ctx context.Context, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: %d mutexes", ErrOutOfRange, n)
	}
	if r.mutexes != nil {
		if err := r.DestroyMutexes(ctx); err != nil {
			return err
		}
	}
	seg, err := r.Malloc(ctx, n*mutexBytes)
	if err != nil {
		return err
	}
	r.mutexes = seg
	return r.Barrier(ctx)
}

// DestroyMutexes destroys the mutexes (ARMCI_Destroy_mutexes); collective.
func (r *Runtime) DestroyMutexes(ctx context.Context) error {
	if r.mutexes == nil {
		return fmt.Errorf("%w: no mutexes", ErrFreed)
	}
	err := r.mutexes.Free(ctx)
	r.mutexes = nil
	return err
}

func (r *Runtime) mutexWord(ctx context.Context, m, proc, word int) (*peer, int, error) {
	if r.mutexes == nil {
		return nil, 0, fmt.Errorf("%w: CreateMutexes was not called", ErrFreed)
	}
	pe, err := r.peer(ctx, proc)
	if err != nil {
		return nil, 0, err
	}
	if m < 0 || (m+1)*mutexBytes > r.mutexes.Len(proc) {
		return nil, 0, fmt.Errorf("%w: mutex %d on rank %d (it has %d)", ErrOutOfRange, m, proc, r.mutexes.Len(proc)/mutexBytes)
	}
	return pe, m*mutexBytes + 8*word, nil
}

// fetchAdd64 is a 64-bit fetch-and-add on any rank's part of seg.
func (r *Runtime) fetchAdd64(ctx context.Context, seg *Segment, pe *peer, off int, v uint64) (uint64, error) {
	return r.atomicOp(ctx, ibv.OpAtomicFetchAdd, seg, pe.rank, off, v, 0)
}

// Lock acquires mutex m on rank proc (ARMCI_Lock), blocking until it is granted or ctx ends.
func (r *Runtime) Lock(ctx context.Context, m, proc int) error {
	pe, off, err := r.mutexWord(ctx, m, proc, 0)
	if err != nil {
		return err
	}
	ticket, err := r.fetchAdd64(ctx, r.mutexes, pe, off, 1)
	if err != nil {
		return fmt.Errorf("rma: lock %d@%d: %w", m, proc, err)
	}
	var perr error
	werr := r.pollUntil(ctx, func() bool {
		serving, err := r.fetchAdd64(ctx, r.mutexes, pe, off+8, 0)
		if err != nil {
			perr = err
			return true
		}
		return serving == ticket
	})
	if perr != nil {
		return fmt.Errorf("rma: lock %d@%d: %w", m, proc, perr)
	}
	return werr
}

// TryLock acquires mutex m on rank proc only if it is free now, without waiting (the try form of
// ARMCI_Lock, as armci-mpi's ARMCI_Trylock): it reads the next ticket and the one being served
// and, when they are equal, takes that ticket with a compare-and-swap, which fails if another
// rank took it first. It reports whether the mutex was acquired; a mutex held or queued for is
// not, and nothing changes then. Errors: those of Lock.
func (r *Runtime) TryLock(ctx context.Context, m, proc int) (bool, error) {
	pe, off, err := r.mutexWord(ctx, m, proc, 0)
	if err != nil {
		return false, err
	}
	next, err := r.fetchAdd64(ctx, r.mutexes, pe, off, 0)
	if err != nil {
		return false, fmt.Errorf("rma: trylock %d@%d: %w", m, proc, err)
	}
	serving, err := r.fetchAdd64(ctx, r.mutexes, pe, off+8, 0)
	if err != nil {
		return false, fmt.Errorf("rma: trylock %d@%d: %w", m, proc, err)
	}
	if next != serving {
		return false, nil
	}
	got, err := r.atomicOp(ctx, ibv.OpAtomicCmpSwap, r.mutexes, proc, off, next, next+1)
	if err != nil {
		return false, fmt.Errorf("rma: trylock %d@%d: %w", m, proc, err)
	}
	return got == next, nil
}

// Unlock releases mutex m on rank proc (ARMCI_Unlock). Operations issued under the lock are
// completed at the target first, so the next holder sees them.
func (r *Runtime) Unlock(ctx context.Context, m, proc int) error {
	pe, off, err := r.mutexWord(ctx, m, proc, 1)
	if err != nil {
		return err
	}
	if err := r.AllFence(ctx); err != nil {
		return err
	}
	_, err = r.fetchAdd64(ctx, r.mutexes, pe, off, 1)
	return err
}
