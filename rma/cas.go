package rma

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/ibv"
)

// CompareSwap atomically replaces the 64-bit word at byte offset off of rank proc's part of seg
// by swap if it equals cmp, and returns the previous value either way (verbs
// IBV_WR_ATOMIC_CMP_AND_SWP; the primitive behind MPI_Compare_and_swap and the window package's
// lock words). off must be 8-byte aligned. Errors: ErrType (misaligned), ErrBadRank,
// ErrOutOfRange, ErrFreed, ErrFinalized, ErrTransport, ctx's.
func (r *Runtime) CompareSwap(ctx context.Context, seg *Segment, proc, off int, cmp, swap int64) (int64, error) {
	old, err := r.cmpSwap(ctx, seg, proc, off, 8, uint64(cmp), uint64(swap))
	return int64(old), err
}

// CompareSwap32 is CompareSwap on a 4-byte word (4-byte aligned); the software verbs extension
// OpAtomicCmpSwap32.
func (r *Runtime) CompareSwap32(ctx context.Context, seg *Segment, proc, off int, cmp, swap int32) (int32, error) {
	old, err := r.cmpSwap(ctx, seg, proc, off, 4, uint64(uint32(cmp)), uint64(uint32(swap)))
	return int32(uint32(old)), err
}

func (r *Runtime) cmpSwap(ctx context.Context, seg *Segment, proc, off, sz int, cmp, swap uint64) (uint64, error) {
	if off%sz != 0 {
		return 0, fmt.Errorf("%w: %d-byte compare-and-swap at byte offset %d", ErrType, sz, off)
	}
	op := ibv.OpAtomicCmpSwap
	if sz == 4 {
		op = ibv.OpAtomicCmpSwap32
	}
	return r.atomicOp(ctx, op, seg, proc, off, cmp, swap)
}
