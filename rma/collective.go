package rma

import (
	"context"
	"fmt"
)

// slot returns the collective scratch slot of rank p in the system segment (offset, size) for
// the current step. The scratch holds two sets of Size slots, used by alternate steps (a step is
// one chunk of an AllReduce or a Broadcast: puts into the slots, a barrier, reads): a rank writes
// step k+2's slots only after the barrier of step k+1, which no rank enters before it has read
// step k's, so a step needs one barrier, not a second one to free its slots.
func (r *Runtime) slot(p int) (int, int) {
	n := ((r.sys.Len(r.rank) - flagBytes) / (2 * r.size)) &^ 63
	set := int(r.collStep & 1)
	return flagBytes + (set*r.size+p)*n, n
}

// AllReduce combines buf element-wise across all ranks with op and leaves the result in every
// rank's buf (armci_msg_gop / GA_Dgop). It is collective; buf holds elements of typ and must have
// the same length on every rank. The result is identical on all ranks: every rank folds the
// contributions in rank order. Errors: ErrType, ErrBadOp, transport errors.
//
// Each chunk that fits a scratch slot is put into slot[me] of every rank, a barrier follows, and
// each rank reduces the slots locally (the slots of alternate chunks and calls alternate between
// two sets, so no second barrier is needed to free them: see slot).
func (r *Runtime) AllReduce(ctx context.Context, typ AccType, op ReduceOp, buf []byte) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := checkReduce(typ, op, len(buf)); err != nil {
		return err
	}
	_, slot := r.slot(0)
	chunk := slot - slot%16
	need := min(len(buf), chunk)
	if len(r.reduceBuf) < need {
		r.reduceBuf = alignedHeap((need + 4095) &^ 4095) // kept: collectives are frequent
	}
	acc := r.reduceBuf
	for start := 0; start < len(buf); start += chunk {
		part := buf[start:min(len(buf), start+chunk)]
		if err := r.spread(ctx, part, func(p int) bool { return true }); err != nil {
			return err
		}
		mine := r.sys.local
		o0, _ := r.slot(0)
		copy(acc, mine[o0:o0+len(part)])
		for p := 1; p < r.size; p++ {
			o, _ := r.slot(p)
			reduceBytes(typ, op, acc[:len(part)], mine[o:o+len(part)])
		}
		finishReduce(typ, op, acc[:len(part)])
		copy(part, acc)
		r.collStep++
	}
	return nil
}

// spread puts part into slot[me] of every rank p with to(p), then runs a barrier.
func (r *Runtime) spread(ctx context.Context, part []byte, to func(p int) bool) error {
	off, _ := r.slot(r.rank)
	var hs []*Handle
	for p := 0; p < r.size; p++ {
		if !to(p) {
			continue
		}
		h, err := r.NbPut(ctx, part, r.sys, p, off)
		if err != nil {
			return fmt.Errorf("rma: collective: %w", err)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		if err := h.Wait(ctx); err != nil {
			return fmt.Errorf("rma: collective: %w", err)
		}
	}
	return r.barrier(ctx)
}

// Broadcast copies root's buf into every rank's buf (armci_msg_brdcst / GA_Brdcst); collective,
// buf must have the same length everywhere.
func (r *Runtime) Broadcast(ctx context.Context, root int, buf []byte) error {
	if _, err := r.peer(ctx, root); err != nil {
		return err
	}
	_, slot := r.slot(0)
	for start := 0; start < len(buf) || start == 0; start += slot {
		part := buf[start:min(len(buf), start+slot)]
		var err error
		if r.rank == root {
			err = r.spread(ctx, part, func(p int) bool { return p != root })
		} else {
			err = r.barrier(ctx)
			o, _ := r.slot(root)
			copy(part, r.sys.local[o:o+len(part)])
		}
		if err != nil {
			return err
		}
		r.collStep++
		if len(buf) == 0 {
			break
		}
	}
	return nil
}
