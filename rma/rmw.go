package rma

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/goarmci/goarmci/ibv"
	"github.com/goarmci/goarmci/internal/accum"
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
	pe, err := r.conn(ctx, proc)
	if err != nil {
		return 0, err
	}
	raddr, rkey, err := seg.target(pe, off, sz)
	if err != nil {
		return 0, err
	}
	if pe.rank == r.rank {
		aop := [...]accum.Op{FetchAndAdd: accum.OpFetchAdd32, FetchAndAddLong: accum.OpFetchAdd64, Swap: accum.OpSwap32, SwapLong: accum.OpSwap64}[op]
		v, err := accum.RMW(aop, seg.local[off:off+sz], uint64(value), 0)
		if sz == 4 {
			return int64(int32(v)), err
		}
		return int64(v), err
	}
	var vop ibv.Opcode
	switch op {
	case FetchAndAdd:
		vop = ibv.OpAtomicFetchAdd32
	case FetchAndAddLong:
		vop = ibv.OpAtomicFetchAdd
	case Swap:
		vop = ibv.OpAtomicSwap32
	default:
		vop = ibv.OpAtomicSwap64
	}
	res := rmwResults.Get().(*[8]byte)
	defer rmwResults.Put(res)
	if err := r.atomic(ctx, pe, vop, res[:sz], raddr, rkey, uint64(value), 0); err != nil {
		return 0, err
	}
	if sz == 4 {
		return int64(int32(binary.LittleEndian.Uint32(res[:]))), nil
	}
	return int64(binary.LittleEndian.Uint64(res[:])), nil
}

// rmwResults holds the fetched-value buffers of Rmw: the buffer goes into a work request (an
// implicit-ODP local buffer), so a stack array would escape and cost a heap allocation per call.
var rmwResults = sync.Pool{New: func() any { return new([8]byte) }}

// atomic runs one remote atomic and waits for it.
func (r *Runtime) atomic(ctx context.Context, pe *peer, op ibv.Opcode, result []byte, raddr uint64, rkey uint32, compareAdd, swap uint64) error {
	if pe.ch.Sync() {
		if err := pe.ch.Do(ibv.SendWR{Opcode: op, LocalBuf: result, RemoteAddr: raddr, RKey: rkey, CompareAdd: compareAdd, Swap: swap}); err != nil {
			return fmt.Errorf("%w: %w", ErrTransport, err)
		}
		return nil
	}
	n, req := r.begin(pe, true)
	err := pe.ch.Atomic(ctx, req, op, result, raddr, rkey, compareAdd, swap)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrTransport, err)
	}
	_, err = r.finish(ctx, n, req, err, true)
	return err
}
