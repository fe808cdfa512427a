package rma

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/ibv"
)

// RmwOp is a read-modify-write operation (ARMCI_Rmw's op).
type RmwOp uint8

const (
	FetchAndAdd     RmwOp = iota + 1 // ARMCI_FETCH_AND_ADD: 32-bit integer
	FetchAndAddLong                  // ARMCI_FETCH_AND_ADD_LONG: 64-bit integer
	Swap                             // ARMCI_SWAP: 32-bit
	SwapLong                         // ARMCI_SWAP_LONG: 64-bit
)

func (o RmwOp) String() string {
	switch o {
	case FetchAndAdd:
		return "FETCH_AND_ADD"
	case FetchAndAddLong:
		return "FETCH_AND_ADD_LONG"
	case Swap:
		return "SWAP"
	case SwapLong:
		return "SWAP_LONG"
	}
	return fmt.Sprintf("RmwOp(%d)", uint8(o))
}

func (o RmwOp) size() int {
	if o == FetchAndAdd || o == Swap {
		return 4
	}
	return 8
}

// Rmw atomically applies op with value to the 32- or 64-bit integer at byte offset off of rank
// proc's part of seg and returns the previous value (ARMCI_Rmw). The offset must be aligned to
// the operand size. Errors: ErrBadOp, ErrType (misaligned), ErrBadRank, ErrOutOfRange, ...
func (r *Runtime) Rmw(ctx context.Context, op RmwOp, seg *Segment, proc, off int, value int64) (int64, error) {
	if op < FetchAndAdd || op > SwapLong {
		return 0, fmt.Errorf("%w: rmw %v", ErrBadOp, op)
	}
	sz := op.size()
	if off%sz != 0 {
		return 0, fmt.Errorf("%w: %v at byte offset %d", ErrType, op, off)
	}
	vop := [...]ibv.Opcode{FetchAndAdd: ibv.OpAtomicFetchAdd32, FetchAndAddLong: ibv.OpAtomicFetchAdd,
		Swap: ibv.OpAtomicSwap32, SwapLong: ibv.OpAtomicSwap64}[op]
	v, err := r.atomicOp(ctx, vop, seg, proc, off, uint64(value), 0)
	if sz == 4 {
		return int64(int32(uint32(v))), err
	}
	return int64(v), err
}

// atomicOp applies the word atomic op (ibv.ApplyAtomic's operands) to the word at byte offset off
// of rank proc's part of seg through the peer's route and returns the word's previous value
// (zero-extended for 32-bit ops). off must be aligned to the word. Errors: ErrBadRank, ErrType
// (misaligned), ErrFreed, ErrOutOfRange, ErrFinalized, ErrTransport, ctx's.
func (r *Runtime) atomicOp(ctx context.Context, op ibv.Opcode, seg *Segment, proc, off int, compareAdd, swap uint64) (uint64, error) {
	pe, err := r.peer(ctx, proc)
	if err != nil {
		return 0, err
	}
	sz := op.AtomicSize()
	if off%sz != 0 {
		return 0, fmt.Errorf("%w: %v at byte offset %d", ErrType, op, off)
	}
	if err := seg.bounds(proc, off, sz); err != nil {
		return 0, err
	}
	if r.stats && seg != r.sys && seg != r.notify {
		pe.ctr.atomics.Add(1)
	}
	return pe.route.atomic(ctx, op, seg, off, compareAdd, swap)
}
