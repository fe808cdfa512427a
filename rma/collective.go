package rma

import (
	"context"
	"encoding/binary"
	"fmt"
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
	return r.allReduce(ctx, worldScratch{r}, &r.reduce, typ, op, buf)
}

// scratch is a set of ranks and their collective scratch, as AllReduce uses them: the world's
// (worldScratch) or a group's (Group).
type scratch interface {
	// scratchMembers is the number of member ranks and this rank's index among them.
	scratchMembers() (n, me int)
	// scratchRank is the absolute rank of member k.
	scratchRank(k int) int
	// slot is the data area of member k's slot for the current step (see Runtime.slot).
	slot(k int) (int, int)
	// scratchSeg is the segment of the slots; scratchStep counts the collective steps so far.
	scratchSeg() *Segment
	scratchStep() *uint64
}

// worldScratch is every rank and the system segment's scratch.
type worldScratch struct{ r *Runtime }

func (w worldScratch) scratchMembers() (int, int) { return w.r.size, w.r.rank }
func (w worldScratch) scratchRank(k int) int      { return k }
func (w worldScratch) slot(k int) (int, int)      { return w.r.slot(k) }
func (w worldScratch) scratchSeg() *Segment       { return w.r.sys }
func (w worldScratch) scratchStep() *uint64       { return &w.r.collStep }

// reduceState is AllReduce's state on one scratch: the accumulator, each set's last chunk after
// its guard word with that chunk's puts in flight, and each set's chunks so far.
type reduceState struct {
	acc   []byte
	msg   [2][]byte
	hs    [2][]*Handle
	count [2]uint64
}

// allReduce is AllReduce over the members of c, with st its state there (checked arguments).
func (r *Runtime) allReduce(ctx context.Context, c scratch, st *reduceState, typ AccType, op ReduceOp, buf []byte) error {
	n, me := c.scratchMembers()
	_, slot := c.slot(0)
	chunk := slot &^ 15
	need := min(len(buf), chunk)
	if len(st.acc) < need {
		st.acc = alignedHeap((need + 4095) &^ 4095) // kept: collectives are frequent
		for set := range st.msg {
			if err := st.complete(ctx, set); err != nil { // the puts of the old buffers
				return err
			}
			st.msg[set] = alignedHeap((8 + need + 4095) &^ 4095)
		}
	}
	mine := c.scratchSeg().Local()
	for start := 0; start < len(buf); start += chunk {
		part := buf[start:min(len(buf), start+chunk)]
		set := *c.scratchStep() & 1
		st.count[set]++ // what every member's flag in this set counts once its chunk is in
		if err := r.contribute(ctx, c, st, part, set); err != nil {
			return err
		}
		for k := 0; k < n; k++ {
			if k == me {
				continue
			}
			o, _ := c.slot(k)
			p := c.scratchRank(k)
			if err := r.awaitCount(ctx, p, mine[o-slotHead:o-slotHead+8], st.count[set]); err != nil {
				return fmt.Errorf("rma: allreduce: rank %d: %w", p, err)
			}
		}
		o0, _ := c.slot(0)
		copy(st.acc, mine[o0:o0+len(part)])
		for k := 1; k < n; k++ {
			o, _ := c.slot(k)
			reduceBytes(typ, op, st.acc[:len(part)], mine[o:o+len(part)])
		}
		finishReduce(typ, op, st.acc[:len(part)])
		copy(part, st.acc)
		*c.scratchStep()++
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

// contribute puts part, after a zero guard word, into my slot of every member of c, then adds one
// to the slot's flag word (see AllReduce). The puts are left in flight: the set's next
// contribution completes them before it reuses their buffer (they complete long before, as a
// rule: the other members' contributions to a later step come after they placed this one), and a
// parked wait for each here would cost a scheduler round trip per put where ranks outnumber
// cores.
func (r *Runtime) contribute(ctx context.Context, c scratch, st *reduceState, part []byte, set uint64) error {
	if err := st.complete(ctx, int(set)); err != nil {
		return err
	}
	n, me := c.scratchMembers()
	seg := c.scratchSeg()
	off, _ := c.slot(me)
	copy(seg.Local()[off:], part)
	msg := st.msg[set][:8+len(part)]
	clear(msg[:8])
	copy(msg[8:], part)
	hs := st.hs[set][:0]
	defer func() { st.hs[set] = hs }()
	for k := 1; k < n; k++ {
		p := c.scratchRank((me + k) % n) // each member starts with its next one
		h, err := r.NbPut(ctx, msg, seg, p, off-8)
		if err == nil {
			hs = append(hs, h)
			h, err = r.NbAcc(ctx, AccInt64, 1, flagAdd, seg, p, off-slotHead)
		}
		if err != nil {
			return fmt.Errorf("rma: allreduce: rank %d: %w", p, err)
		}
		hs = append(hs, h)
	}
	return nil
}

// complete waits for the puts of set's last contribution.
func (st *reduceState) complete(ctx context.Context, set int) error {
	for i, h := range st.hs[set] {
		if err := h.Wait(ctx); err != nil {
			st.hs[set] = st.hs[set][i+1:] // the rest: waited by the next call
			return fmt.Errorf("rma: allreduce: an earlier contribution: %w", err)
		}
	}
	st.hs[set] = st.hs[set][:0]
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
