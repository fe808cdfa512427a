package window

import (
	"context"
	"fmt"

	"github.com/goarmci/goarmci/internal/accum"
	"github.com/goarmci/goarmci/internal/memcopy"
	"github.com/goarmci/goarmci/rma"
)

// Word atomics and small copies of the window, on one path per target decided at Create: to a
// direct target (this rank, or a same-node rank reached through a mapped view) they are the
// CPU's atomic instructions, loads and stores on the target's memory as this process maps it
// (rma's Runtime.Mapped, which checks the runtime, the rank and the segment on every call, as
// each rma operation does); to any other target they are rma's remote atomics, Put and Get.
//
// Both paths act on the same words with the same instructions: rma's Rmw and CompareSwap to a
// direct target are those CPU atomics on the same mapping, and a network rank's atomic work
// requests are applied at the target with them too (ibv.ApplyAtomic). So the lock words, flags
// and counters of the synchronization segment, and the accumulate-class operations on window
// words, stay atomic with respect to each other whichever path each rank takes (the window's
// atomicity domain, AccOps, is unchanged: the accumulate lock is taken and released by the same
// compare-and-swap and swap, only without rma's per-call dispatch). [MPI-3.1] §11.7.1.

// mapped returns t's part of seg (the window's w.sync or w.data) through this process's mapping,
// or nil when t is not direct or cannot be mapped (then the caller uses rma): the data part
// mapped at Create while rma says it is stable (dataPart), else what rma.Mapped returns now, with
// its checks and errors (mapAgain). The operations run at issue call dataPart, then mapAgain.
func (w *Window) mapped(ctx context.Context, seg *rma.Segment, t int) ([]byte, error) {
	if seg == w.data {
		if m := w.dataPart(t); m != nil {
			return m, nil
		}
	}
	return w.mapAgain(ctx, seg, t)
}

// dataPart is t's part of the window mapped at Create (targetState.data) while rma says it is
// stable; nil otherwise (then the caller asks rma: mapAgain). Inlined by the operations run at
// issue.
func (w *Window) dataPart(t int) []byte {
	if m := w.tgt[t].data; m != nil && w.rt.MappedStable(w.data) {
		return m
	}
	return nil
}

// mapAgain is mapped's path through rma.Mapped.
func (w *Window) mapAgain(ctx context.Context, seg *rma.Segment, t int) ([]byte, error) {
	if !w.tgt[t].direct {
		return nil, nil
	}
	return w.rt.Mapped(ctx, seg, t)
}

// mapParts takes the direct ranks' parts (targetState's words and data) at Create. A part that
// cannot be mapped now stays nil: the window asks rma at each use instead.
func (w *Window) mapParts(ctx context.Context) {
	for p := range w.n {
		if !w.tgt[p].direct {
			continue
		}
		m, _ := w.rt.Mapped(ctx, w.sync, p)
		w.tgt[p].words = asWords(m)
		w.tgt[p].data, _ = w.rt.Mapped(ctx, w.data, p)
	}
}

// rmw applies the word atomic op (accum.RMW's operands: fetch-and-add adds operand, swap stores
// it, compare-and-swap stores it where the word equals compare) to the word at byte offset off of
// t's part of seg and returns the word's previous value (a 32-bit op's zero-extended).
func (w *Window) rmw(ctx context.Context, seg *rma.Segment, t, off int, op accum.Op, operand, compare uint64) (uint64, error) {
	m, err := w.mapped(ctx, seg, t)
	if err != nil {
		return 0, err
	}
	size := 8
	if op >= accum.OpFetchAdd32 {
		size = 4
	}
	if m != nil {
		if off < 0 || off > len(m)-size {
			return 0, fmt.Errorf("%w: %d-byte word at byte %d of rank %d's %d bytes", ErrRMARange, size, off, t, len(m))
		}
		return accum.RMW(op, m[off:off+size], operand, compare)
	}
	var v int64
	switch op {
	case accum.OpFetchAdd64:
		v, err = w.rt.Rmw(ctx, rma.FetchAndAddLong, seg, t, off, int64(operand))
	case accum.OpSwap64:
		v, err = w.rt.Rmw(ctx, rma.SwapLong, seg, t, off, int64(operand))
	case accum.OpCmpSwap64:
		v, err = w.rt.CompareSwap(ctx, seg, t, off, int64(compare), int64(operand))
	case accum.OpFetchAdd32:
		v, err = w.rt.Rmw(ctx, rma.FetchAndAdd, seg, t, off, int64(int32(uint32(operand))))
	case accum.OpSwap32:
		v, err = w.rt.Rmw(ctx, rma.Swap, seg, t, off, int64(int32(uint32(operand))))
	default: // accum.OpCmpSwap32
		var v32 int32
		v32, err = w.rt.CompareSwap32(ctx, seg, t, off, int32(uint32(compare)), int32(uint32(operand)))
		v = int64(v32)
	}
	if size == 4 {
		return uint64(uint32(v)), err
	}
	return uint64(v), err
}

// dataAt is the n bytes at byte offset off of t's window on the mapped path, or nil when t's
// part is not mapped (the caller goes through rma). Errors: ErrRMARange, mapAgain's.
func (w *Window) dataAt(ctx context.Context, t, off, n int) ([]byte, error) {
	m := w.dataPart(t)
	if m == nil {
		var err error
		if m, err = w.mapAgain(ctx, w.data, t); err != nil || m == nil {
			return nil, err
		}
	}
	if off < 0 || off > len(m)-n {
		return nil, fmt.Errorf("%w: [%d,+%d) of rank %d's %d bytes", ErrRMARange, off, n, t, len(m))
	}
	return m[off : off+n], nil
}

// put copies src to byte offset off of t's window (complete at t when it returns on the mapped
// path; through rma's blocking Put otherwise).
func (w *Window) put(ctx context.Context, src []byte, t, off int) error {
	m, err := w.dataAt(ctx, t, off, len(src))
	if err != nil {
		return err
	}
	if m != nil {
		memcopy.Copy(m, src)
		return nil
	}
	return w.rt.Put(ctx, src, w.data, t, off)
}

// get copies len(dst) bytes at byte offset off of t's window into dst (as put).
func (w *Window) get(ctx context.Context, dst []byte, t, off int) error {
	m, err := w.dataAt(ctx, t, off, len(dst))
	if err != nil {
		return err
	}
	if m != nil {
		memcopy.Copy(dst, m)
		return nil
	}
	return w.rt.Get(ctx, w.data, t, off, dst)
}
