package rma

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/goarmci/goarmci/internal/accum"
)

// slot returns the data area of rank p's collective scratch slot in the system segment (offset,
// size) for the current step; the slot's first two words, before it, are AllReduce's flag word and
// guard word. The scratch holds two sets of Size slots, used by alternate steps (a step is one
// chunk of an AllReduce or a Broadcast): a rank writes step k+2's slots only after it knows that
// every rank has read its step k slots — after the barrier of step k+1 (Broadcast), or with every
// rank's step k+1 contribution (AllReduce), which no rank sends before it has read step k's.
func (r *Runtime) slot(p int) (int, int) {
	n := ((r.sys.Len(r.rank) - flagBytes) / (2 * r.size)) &^ 63
	set := int(r.collStep & 1)
	return flagBytes + (set*r.size+p)*n + slotHead, n - slotHead
}

// slotHead is the bytes of a scratch slot's flag word and guard word. Only flags are ever written
// in the flag word: a word that also held data could hold a later count by chance.
const slotHead = 16

// AllReduce combines buf element-wise across all ranks with op and leaves the result in every
// rank's buf (armci_msg_gop / GA_Dgop). It is collective; buf holds elements of typ and must have
// the same length on every rank. The result is identical on all ranks: every rank folds the
// contributions in rank order. Errors: ErrType, ErrBadOp, ErrPeerFailed (a rank failed before
// its contribution arrived), transport errors.
//
// Each chunk that fits a scratch slot is put into slot[me] of every rank (after a zero guard word),
// then one is added to the slot's flag word, which so counts the chunks this rank put there; each
// rank waits until the flags of the other ranks' slots count the step's chunk and reduces the
// slots locally. No barrier and no wait for the puts' remote completion: the flag's accumulate
// also adds zero to the guard word, so it overlaps the put and is applied after it — by program
// order over shared memory, by the network channel's ordering of overlapping operations (one
// queue pair) over the network — and as an atomic add it orders the data before the flag for the
// rank that polls the flag (which never reads the guard). The slots of alternate chunks and calls
// alternate between two sets (see slot): a rank writes step k+2's slots only after it has every
// rank's step k+1 contribution, which no rank sends before it has read step k's. A call that
// fails (ctx ended, a rank failed) leaves the collective state of the ranks apart: as with MPI,
// no collective may follow it.
func (r *Runtime) AllReduce(ctx context.Context, typ AccType, op ReduceOp, buf []byte) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := checkReduce(typ, op, len(buf)); err != nil {
		return err
	}
	_, slot := r.slot(0)
	chunk := slot &^ 15
	need := min(len(buf), chunk)
	if len(r.reduceBuf) < need {
		r.reduceBuf = alignedHeap((need + 4095) &^ 4095) // kept: collectives are frequent
		for set := range r.reduceMsg {
			if err := r.completeReduce(ctx, set); err != nil { // the puts of the old buffers
				return err
			}
			r.reduceMsg[set] = alignedHeap((8 + need + 4095) &^ 4095)
		}
	}
	acc := r.reduceBuf
	mine := r.sys.local
	for start := 0; start < len(buf); start += chunk {
		part := buf[start:min(len(buf), start+chunk)]
		set := r.collStep & 1
		r.reduceCount[set]++ // what every rank's flag in this set counts once its chunk is in
		if err := r.contribute(ctx, part, set); err != nil {
			return err
		}
		for p := 0; p < r.size; p++ {
			if p == r.rank {
				continue
			}
			o, _ := r.slot(p)
			if err := r.awaitFlag(ctx, p, mine[o-slotHead:o-slotHead+8], r.reduceCount[set]); err != nil {
				return err
			}
		}
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

// flagAdd is the accumulate that follows a chunk: one to the slot's flag word, zero to its guard
// word (see AllReduce).
var flagAdd = func() []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, 1)
	return b
}()

// contribute puts part, after a zero guard word, into slot[me] of every rank, then adds one to the
// slot's flag word (see AllReduce). The puts are left in flight: the set's next contribution
// completes them before it reuses their buffer (they complete long before, as a rule: the other
// ranks' contributions to a later step come after they placed this one), and a parked wait for
// each here would cost a scheduler round trip per put where ranks outnumber cores.
func (r *Runtime) contribute(ctx context.Context, part []byte, set uint64) error {
	if err := r.completeReduce(ctx, int(set)); err != nil {
		return err
	}
	off, _ := r.slot(r.rank)
	copy(r.sys.local[off:], part)
	msg := r.reduceMsg[set][:8+len(part)]
	clear(msg[:8])
	copy(msg[8:], part)
	hs := r.reduceHs[set][:0]
	defer func() { r.reduceHs[set] = hs }()
	for k := 1; k < r.size; k++ {
		p := (r.rank + k) % r.size // each rank starts with its next one
		h, err := r.NbPut(ctx, msg, r.sys, p, off-8)
		if err == nil {
			hs = append(hs, h)
			h, err = r.NbAcc(ctx, AccInt64, 1, flagAdd, r.sys, p, off-slotHead)
		}
		if err != nil {
			return fmt.Errorf("rma: allreduce: rank %d: %w", p, err)
		}
		hs = append(hs, h)
	}
	return nil
}

// completeReduce waits for the puts of set's last contribution.
func (r *Runtime) completeReduce(ctx context.Context, set int) error {
	for i, h := range r.reduceHs[set] {
		if err := h.Wait(ctx); err != nil {
			r.reduceHs[set] = r.reduceHs[set][i+1:] // the rest: waited by the next call
			return fmt.Errorf("rma: allreduce: an earlier contribution: %w", err)
		}
	}
	r.reduceHs[set] = r.reduceHs[set][:0]
	return nil
}

// awaitFlag waits until rank p's flag word counts want chunks (or p failed).
func (r *Runtime) awaitFlag(ctx context.Context, p int, word []byte, want uint64) error {
	arrived := func() bool {
		v, _ := accum.Load64(word)
		return v >= want
	}
	if arrived() {
		return nil
	}
	err := r.pollUntilProbe(ctx, func() bool { return arrived() || r.failedErr(p) != nil }, r.liveness(ctx, p))
	if err == nil && !arrived() {
		err = r.failedErr(p)
	}
	if err != nil {
		return fmt.Errorf("rma: allreduce: rank %d: %w", p, err)
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
