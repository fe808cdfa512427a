package ibv

import (
	"fmt"

	"github.com/goarmci/goarmci/internal/accum"
)

// ApplyAtomic applies the atomic work request opcode op to word (the responder's 4 or 8 bytes,
// aligned to their size) with the verbs operands of SendWR: a fetch-and-add adds compareAdd, a
// swap stores compareAdd, a compare-and-swap stores swap where the word equals compareAdd. It
// returns the word's previous value (a 32-bit op's zero-extended). Every provider and the direct
// view apply atomics through it with the CPU's atomic instructions, so atomics on one word are
// atomic with respect to each other whoever executes them (IBV_WR_ATOMIC_FETCH_AND_ADD,
// IBV_WR_ATOMIC_CMP_AND_SWP and the extended atomics; IBA vol. 1 §9.4.5). Errors: ErrInvalidWR
// for an opcode that is not a 32/64-bit atomic, or wrapping accum.ErrShape for a word of the
// wrong size or alignment; word is then unchanged.
func ApplyAtomic(op Opcode, word []byte, compareAdd, swap uint64) (uint64, error) {
	var aop accum.Op
	switch op {
	case OpAtomicFetchAdd:
		aop = accum.OpFetchAdd64
	case OpAtomicCmpSwap:
		return accum.RMW(accum.OpCmpSwap64, word, swap, compareAdd)
	case OpAtomicSwap64:
		aop = accum.OpSwap64
	case OpAtomicFetchAdd32:
		aop = accum.OpFetchAdd32
	case OpAtomicSwap32:
		aop = accum.OpSwap32
	case OpAtomicCmpSwap32:
		return accum.RMW(accum.OpCmpSwap32, word, swap, compareAdd)
	default:
		return 0, fmt.Errorf("%w: %v is not a word atomic", ErrInvalidArgument, op)
	}
	return accum.RMW(aop, word, compareAdd, 0)
}

// Atomic applies the atomic work request opcode op to the word at byte offset off of the view
// (ApplyAtomic's operands and result), with the CPU's atomic instructions on the target's memory:
// the same instructions the provider uses for atomic work requests into the region, from any
// process, so both kinds mix on one word. Errors: those of ApplyAtomic, and ErrOutOfBounds for a
// word outside the view.
func (v *RemoteView) Atomic(op Opcode, off int, compareAdd, swap uint64) (uint64, error) {
	n := op.AtomicSize()
	if off < 0 || n == 0 || off > len(v.Mem)-n {
		return 0, fmt.Errorf("%w: %v at byte %d of a %d-byte view", ErrOutOfBounds, op, off, len(v.Mem))
	}
	return ApplyAtomic(op, v.Mem[off:off+n], compareAdd, swap)
}

// StoreRelease64 stores val into the 8-byte word at byte offset off of the view with a release
// store (accum.StoreRelease64): a target polling the word sees it whole, after every store this
// thread made before it, and atomic with respect to atomics on the word from any process. The
// store of a flag the target polls (MPI's shared-memory flags), one cache-line transfer cheaper
// than an atomic swap. Errors: ErrOutOfBounds for a word outside the view, accum.ErrShape
// wrapped for a misaligned one; nothing is stored then.
func (v *RemoteView) StoreRelease64(off int, val uint64) error {
	if off < 0 || off > len(v.Mem)-8 {
		return fmt.Errorf("%w: 8-byte store at byte %d of a %d-byte view", ErrOutOfBounds, off, len(v.Mem))
	}
	return accum.StoreRelease64(v.Mem[off:off+8], val)
}
