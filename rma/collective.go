package rma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/goarmci/goarmci/ibv"
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
// the same length on every rank. The result is identical on all ranks. Errors: ErrType,
// ErrBadOp, ErrPeerFailed (a rank failed before its contribution arrived), transport errors.
//
// Among the ranks of one node over shared memory (by recursive doubling where a rank is reached
// over the network: reduceDoubling), each chunk that fits a scratch slot is put into slot[me] of
// every rank (after a zero guard word), then one is added to the slot's flag word, which so
// counts the chunks this rank put there; each rank waits until the flags of the other ranks'
// slots count the step's chunk and folds the slots locally, in rank order. No barrier and no
// wait for the puts' remote completion: the flag's accumulate also adds zero to the guard word, so it overlaps the put and is applied after it — by program
// order over shared memory, by the network channel's ordering of overlapping operations (one
// queue pair) over the network — and as an atomic add it orders the data before the flag for the
// rank that polls the flag (which never reads the guard). The slots of alternate chunks and calls
// alternate between two sets (see slot): a rank writes step k+2's slots only after it has every
// rank's step k+1 contribution, which no rank sends before it has read step k's. A call that
// fails (ctx ended, a rank failed) leaves the collective state of the ranks apart: as with MPI,
// no collective may follow it; one made once this rank knows of a failure returns it at once.
func (r *Runtime) AllReduce(ctx context.Context, typ AccType, op ReduceOp, buf []byte) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := checkReduce(typ, op, len(buf)); err != nil {
		return err
	}
	return r.allReduce(ctx, worldScratch{r}, &r.reduce, typ, op, buf)
}

// scratch is a set of ranks and their collective scratch, as AllReduce and AllGather use them:
// the world's (worldScratch) or a group's (Group).
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

// reduceState is the collectives' (AllReduce's, AllGather's) state on one scratch: the
// accumulator, each set's last messages (a chunk after its guard word) with their puts in
// flight, and the chunks each member has put so far.
type reduceState struct {
	acc []byte
	tmp []byte // a chunk's worth, for folds whose first operand is a slot
	msg [2][]byte
	hs  [2][]*Handle
	// count is, per set and member, the chunks that member has put into its slot here so far
	// once this step's is in (expect): each algorithm and collective counts only the members
	// it receives from, so all of them share the flag words.
	count [2][]uint64
	// doubling is the algorithm, chosen when the scratch is set up (reduceByDoubling): recursive
	// doubling, else every member puts its chunk to every other.
	doubling bool
}

// reduceByDoubling reports whether an AllReduce among the members of c runs by recursive
// doubling: where more than two members and some member is reached over the network. There a
// member receives ⌈log2 n⌉ chunks in as many rounds instead of n−1 at once, and each chunk costs
// the receiving process a turn on a core to place it (its reader's): ranks that share cores wait
// for each other's turns n−1 times a step. Over shared memory the direct exchange stays: one
// round of copies, and no process has to run for another's chunk to land. Every member decides
// the same, from the configuration and the node layout agreed at Init.
func (r *Runtime) reduceByDoubling(c scratch) bool {
	n, _ := c.scratchMembers()
	if n <= 2 {
		return false
	}
	if r.cfg.Transport == TransportTCP {
		return true
	}
	for k := range n {
		if !slices.Contains(r.node.members, c.scratchRank(k)) {
			return true
		}
	}
	return false
}

// allReduce is AllReduce over the members of c, with st its state there (checked arguments).
func (r *Runtime) allReduce(ctx context.Context, c scratch, st *reduceState, typ AccType, op ReduceOp, buf []byte) error {
	if err := r.membersFailed(c); err != nil {
		return fmt.Errorf("rma: allreduce: %w", err) // known before any slot is touched
	}
	n, me := c.scratchMembers()
	_, slot := c.slot(0)
	chunk := slot &^ 15
	if err := st.buffers(ctx, n, min(len(buf), chunk)); err != nil {
		return err
	}
	mine := c.scratchSeg().Local()
	for start := 0; start < len(buf); start += chunk {
		part := buf[start:min(len(buf), start+chunk)]
		set := int(*c.scratchStep() & 1)
		if st.doubling {
			if err := r.reduceDoubling(ctx, c, st, typ, op, part, set); err != nil {
				return err
			}
			*c.scratchStep()++
			continue
		}
		o, _ := c.slot(me)
		copy(mine[o:], part) // folded with the others' below
		if err := r.contribute(ctx, c, st, part, set); err != nil {
			return err
		}
		for k := 0; k < n; k++ {
			if k != me {
				if _, err := r.awaitMember(ctx, c, st, set, k, len(part), nil); err != nil {
					return fmt.Errorf("rma: allreduce: %w", err)
				}
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

// membersFailed is the failure of a member of c, or nil: a collective among them can no longer
// complete once one has failed.
func (r *Runtime) membersFailed(c scratch) error {
	if r.anyFailedErr() == nil {
		return nil
	}
	n, _ := c.scratchMembers()
	for k := range n {
		if err := r.failedErr(c.scratchRank(k)); err != nil {
			return err
		}
	}
	return nil
}

// buffers makes st's accumulator and message buffers hold chunks of need bytes among n members,
// after completing the puts of the old ones.
func (st *reduceState) buffers(ctx context.Context, n, need int) error {
	if len(st.count[0]) < n {
		st.count = [2][]uint64{make([]uint64, n), make([]uint64, n)}
	}
	need = max(need, 64)
	if len(st.acc) < need {
		st.acc = alignedHeap((need + 4095) &^ 4095) // kept: collectives are frequent
		st.tmp = make([]byte, len(st.acc))
	}
	// the message buffers of a step: sized by the chunk and the members' rounds, each of which
	// may have grown while the accumulator's rounding already held the chunk
	msgs := msgBufs(n) * msgStride(need)
	for set := range st.msg {
		if len(st.msg[set]) >= msgs {
			continue
		}
		if err := st.complete(ctx, set); err != nil { // the puts of the old buffers
			return err
		}
		st.msg[set] = alignedHeap((msgs + 4095) &^ 4095)
	}
	return nil
}

// awaitMember waits for member k's chunk of this step in set (its flag's next count) and returns
// the chunk's first size bytes in k's slot here. failed ends the wait (nil: k's failure).
func (r *Runtime) awaitMember(ctx context.Context, c scratch, st *reduceState, set, k, size int, failed func() error) ([]byte, error) {
	st.count[set][k]++
	o, _ := c.slot(k)
	p := c.scratchRank(k)
	mine := c.scratchSeg().Local()
	if err := r.awaitCount(ctx, p, mine[o-slotHead:o-slotHead+8], st.count[set][k], failed); err != nil {
		return nil, fmt.Errorf("rank %d: %w", p, err)
	}
	return mine[o : o+size], nil
}

// flagAdd is the accumulate that follows a chunk: one to the slot's flag word, zero to its guard
// word (see AllReduce).
var flagAdd = func() []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, 1)
	return b
}()

// contribute puts part, after a zero guard word, into my slot of every other member of c, then
// adds one to the slot's flag word (see AllReduce). The puts are left in flight: the set's next
// contribution completes them before it reuses their buffer (they complete long before, as a
// rule: the other members' contributions to a later step come after they placed this one), and a
// parked wait for each here would cost a scheduler round trip per put where ranks outnumber
// cores.
func (r *Runtime) contribute(ctx context.Context, c scratch, st *reduceState, part []byte, set int) error {
	if err := st.complete(ctx, set); err != nil {
		return err
	}
	n, me := c.scratchMembers()
	msg := st.msg[set][:8+len(part)]
	clear(msg[:8])
	copy(msg[8:], part)
	for k := 1; k < n; k++ {
		if err := r.putChunk(ctx, c, st, set, (me+k)%n, msg); err != nil { // each member starts with its next one
			return err
		}
	}
	return nil
}

// putChunk puts msg (a zero guard word, then the chunk) into my slot of member k, then adds one
// to that slot's flag word, leaving both in flight in st.hs[set] (see AllReduce).
func (r *Runtime) putChunk(ctx context.Context, c scratch, st *reduceState, set, k int, msg []byte) error {
	_, me := c.scratchMembers()
	off, _ := c.slot(me)
	seg, p := c.scratchSeg(), c.scratchRank(k)
	hs, err := r.putNotify(ctx, msg, seg, p, off-8, flagAdd, off-slotHead, st.hs[set])
	st.hs[set] = hs
	if err != nil {
		return fmt.Errorf("rma: allreduce: rank %d: %w", p, err)
	}
	return nil
}

// putNotify puts msg at byte offset off of rank p's part of seg, then accumulates note (int64
// elements) at noff, applied after the put, and appends the handles to wait on to hs. To a
// network peer over a channel of one subchannel both go as one list of work requests
// (multirail.Channel.WriteNotify: one burst on the wire, acknowledged together, one handle);
// otherwise as an NbPut and an NbAcc, which the channel orders as overlapping requests.
func (r *Runtime) putNotify(ctx context.Context, msg []byte, seg *Segment, p, off int, note []byte, noff int, hs []*Handle) ([]*Handle, error) {
	pe, err := r.peer(ctx, p)
	if err != nil {
		return hs, err
	}
	if pe.route.kind == routeDial {
		if err := r.dial(ctx, pe); err != nil {
			return hs, err
		}
	}
	twoOps := func() ([]*Handle, error) {
		h, err := r.NbPut(ctx, msg, seg, p, off)
		if err != nil {
			return hs, err
		}
		hs = append(hs, h)
		if h, err = r.NbAcc(ctx, AccInt64, 1, note, seg, p, noff); err != nil {
			return hs, err
		}
		return append(hs, h), nil
	}
	if k := pe.route.kind; k != routeNet && k != routeDial {
		return twoOps()
	}
	if ch := pe.ch.Load(); ch == nil || len(ch.Subchannels()) != 1 {
		return twoOps() // decided again after the gate (netRoute.putNotify)
	}
	acc := xfer{kind: kAcc, typ: AccInt64, scale: 1}
	if err := acc.checkPiece(noff, len(note)); err != nil {
		return hs, err
	}
	if err := seg.bounds(p, off, len(msg)); err != nil {
		return hs, err
	}
	if err := seg.bounds(p, noff, len(note)); err != nil {
		return hs, err
	}
	if r.stats && seg != r.sys {
		pe.count(xfer{kind: kPut}, len(msg))
		pe.count(acc, len(note))
	}
	h, err := netRoute{r, pe}.putNotify(ctx, msg, seg, off, note, noff)
	if errors.Is(err, ibv.ErrUnsupported) { // the peer's channel changed to several subchannels
		return twoOps()
	}
	if h != nil {
		hs = append(hs, h)
	}
	return hs, err
}

// msgStride is the bytes of one message buffer of a chunk of need bytes: its guard word and the
// chunk, rounded to a cache line.
func msgStride(need int) int { return (8 + need + 63) &^ 63 }

// msgBufs is how many message buffers a step of an AllReduce among n members fills: one per
// round of recursive doubling, and one for the result sent back to a member folded in.
func msgBufs(n int) int { return bits.Len(uint(n)) + 1 }

// reduceDoubling is one step of AllReduce by recursive doubling among the members of c
// (MPICH's algorithm for short vectors [Thakur05]): with m the largest power of two up to
// n and rem = n − m, each even member below 2·rem first puts its chunk to the odd member after it
// and waits for that member's result; the others run log2 m rounds, in round j exchanging their
// partial results with the member whose index among them differs in bit j, then the odd members
// below 2·rem put the result back. Each pair of partners folds the lower member's partial first,
// so every member ends with the same bits. Every message is a chunk put into the sender's slot
// at the receiver followed by the flag's accumulate (putChunk); a member receives from each
// sender at most once a step, so the slot of the sender is free.
func (r *Runtime) reduceDoubling(ctx context.Context, c scratch, st *reduceState, typ AccType, op ReduceOp, part []byte, set int) error {
	if err := st.complete(ctx, set); err != nil {
		return err
	}
	n, me := c.scratchMembers()
	acc := st.acc[:len(part)]
	copy(acc, part)
	stride := msgStride(len(part))
	// a member waits for the partners of its rounds only, which may wait for a failed member
	// it never hears from: every wait ends with any member's failure
	failed := func() error { return r.membersFailed(c) }
	sends := 0
	send := func(k int) error {
		msg := st.msg[set][sends*stride : sends*stride+8+len(part)]
		sends++
		clear(msg[:8])
		copy(msg[8:], acc)
		return r.putChunk(ctx, c, st, set, k, msg)
	}
	// recv waits for member k's chunk and folds it into acc, the lower member's first.
	recv := func(k int) error {
		in, err := r.awaitMember(ctx, c, st, set, k, len(part), failed)
		if err != nil {
			return fmt.Errorf("rma: allreduce: %w", err)
		}
		if k < me { // acc = in ⊕ acc, the slot left as it came
			tmp := st.tmp[:len(part)]
			copy(tmp, in)
			reduceBytes(typ, op, tmp, acc)
			copy(acc, tmp)
		} else {
			reduceBytes(typ, op, acc, in)
		}
		return nil
	}
	m := 1 << (bits.Len(uint(n)) - 1)
	rem := n - m
	if me < 2*rem && me%2 == 0 { // folded into me+1
		if err := send(me + 1); err != nil {
			return err
		}
		res, err := r.awaitMember(ctx, c, st, set, me+1, len(part), failed)
		if err != nil {
			return fmt.Errorf("rma: allreduce: %w", err)
		}
		copy(part, res)
		return nil
	}
	vr := me - rem // index among the m members of the rounds
	if me < 2*rem {
		if err := recv(me - 1); err != nil {
			return err
		}
		vr = me / 2
	}
	for bit := 1; bit < m; bit <<= 1 {
		vp := vr ^ bit
		k := vp + rem
		if vp < rem {
			k = 2*vp + 1
		}
		if err := send(k); err != nil {
			return err
		}
		if err := recv(k); err != nil {
			return err
		}
	}
	finishReduce(typ, op, acc)
	if me < 2*rem {
		if err := send(me - 1); err != nil {
			return err
		}
	}
	copy(part, acc)
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

// AllGather gathers the ranks' parts of buf into every rank's buf (MPI_Allgatherv with the
// parts in rank order; GA programs call it beside GA, as they call MPI's collectives). Rank p's
// part is buf[offs[p]:offs[p+1]]: on entry each rank's own part holds its contribution, on
// return every part holds its rank's. Collective: every rank passes the same offs (Size+1
// ascending byte offsets from 0 to len(buf)). Errors: ErrOutOfRange (offs do not describe
// buf; nothing is sent), ErrPeerFailed (at once when this rank knows of a failure), ctx's,
// transport errors.
//
// Each rank puts its part, in chunks of at most a scratch slot, into its slot at every other
// rank, each chunk followed by the flag's accumulate as in AllReduce, and copies the others'
// chunks out of its slots as their flags count them: one round of messages, no barrier and no
// wait for the puts' acknowledgments.
func (r *Runtime) AllGather(ctx context.Context, buf []byte, offs []int) error {
	if err := r.check(); err != nil {
		return err
	}
	if err := checkGather(r.size, buf, offs); err != nil {
		return err
	}
	return r.allGather(ctx, worldScratch{r}, &r.reduce, buf, offs)
}

// checkGather checks AllGather's offsets of buf's parts among n ranks (ErrOutOfRange).
func checkGather(n int, buf []byte, offs []int) error {
	if len(offs) != n+1 || offs[0] != 0 || offs[n] != len(buf) {
		return fmt.Errorf("%w: allgather: %d offsets for %d ranks and %d bytes", ErrOutOfRange, len(offs), n, len(buf))
	}
	for p := range n {
		if offs[p+1] < offs[p] {
			return fmt.Errorf("%w: allgather: offsets %d > %d", ErrOutOfRange, offs[p], offs[p+1])
		}
	}
	return nil
}

// allGather is AllGather over the members of c, with st its state there (checked arguments;
// offs indexed by member).
func (r *Runtime) allGather(ctx context.Context, c scratch, st *reduceState, buf []byte, offs []int) error {
	if err := r.membersFailed(c); err != nil {
		return fmt.Errorf("rma: allgather: %w", err)
	}
	n, me := c.scratchMembers()
	_, slot := c.slot(0)
	chunk := slot &^ 15
	most := 0
	for k := range n {
		most = max(most, offs[k+1]-offs[k])
	}
	if err := st.buffers(ctx, n, min(most, chunk)); err != nil {
		return err
	}
	piece := func(k, start int) []byte {
		return buf[min(offs[k]+start, offs[k+1]):min(offs[k]+start+chunk, offs[k+1])]
	}
	for start := 0; start < most || start == 0; start += chunk {
		set := int(*c.scratchStep() & 1)
		if err := r.contribute(ctx, c, st, piece(me, start), set); err != nil {
			return err
		}
		for k := range n {
			if k == me {
				continue
			}
			dst := piece(k, start)
			in, err := r.awaitMember(ctx, c, st, set, k, len(dst), nil)
			if err != nil {
				return fmt.Errorf("rma: allgather: %w", err)
			}
			copy(dst, in)
		}
		*c.scratchStep()++
		if most == 0 {
			break
		}
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
